-- The denominator choice as data (issue 42 part 2): for every area-year of the build with both a
-- registered and a DEIS-corrected births figure (the RM's communes and the region, in the
-- build's years: 2010-2019 with the bundled data, 2005-2016 with the DEIS deaths and the bundled
-- births), both births, the correction factor, the rate on each and their ratio. The rates are
-- given where fct_area_year_rates publishes a rate for the area-year (its checks hold the births
-- var births_denominator chose: `births_basis`), else null with its unavailable_reason.
with counts as (
    select * from {{ ref('int_area_year_counts') }}
    where registered_live_births is not null and corrected_live_births is not null
),

rates as (
    select
        *,
        case when count_problem is null then {{ rate('deaths', 'registered_live_births', 'multiplier') }} end
            as rate_on_registered,
        case when count_problem is null then {{ rate('deaths', 'corrected_live_births', 'multiplier') }} end
            as rate_on_corrected
    from counts
)

select
    area_level,
    area_code,
    area_name,
    region_code,
    cast(year as integer) as year,
    indicator,
    cast(case when count_problem is null then deaths end as bigint) as deaths,
    cast(registered_live_births as bigint) as registered_live_births,
    cast(corrected_live_births as bigint) as corrected_live_births,
    case when registered_live_births > 0 then corrected_live_births * 1.0 / registered_live_births end
        as correction_factor,
    rate_on_registered,
    rate_on_corrected,
    case when rate_on_registered > 0 then rate_on_corrected / rate_on_registered end as rate_ratio,
    rate_on_corrected - rate_on_registered as rate_difference,
    births_basis,
    count_problem as unavailable_reason
from rates
