-- The warehouse's infant mortality rates beside MINSAL's official ones below the country
-- (DRDSS indicator matrix 2023; docs/methods/comparisons.md, "Official anchors below the country: MINSAL"): one row
-- per unit and period MINSAL
-- publishes a both-sexes rate for: country and regions 2017-2019 and 2020, regions and communes
-- 2011-2020. Ours is pooled over the years of MINSAL's period the build has (sum of deaths /
-- sum of births over the years with a published rate: the pooling rule of
-- int_period_pooled_counts), with exact Poisson limits. The bundled data end in 2019: against
-- MINSAL's 2011-2020 ours is 2011-2019, and `period_mismatch` says so on the row; 2020 has no
-- figure of ours. The 2017-2019 rows of the country and regions measure the derived count's
-- bias (rate_ratio); a same-period row whose MINSAL rate is outside our interval and farther
-- than var official_anchor_tolerance_percent is audited (int_audit__official_anchors).
{% set tolerance = number_var('official_anchor_tolerance_percent') %}

with minsal as (
    select * from {{ ref('stg_minsal__drdss_2023_infant_mortality_rates') }}
    where row_sex = 'total'
),

-- One row per unit and published period (both sexes), the sexes beside it.
minsal_periods as (
    {%- for start, end, suffix in [(2017, 2019, '2017_2019'), (2020, 2020, '2020'), (2011, 2020, '2011_2020')] %}
    select
        area_level, area_code, area_name as minsal_area_name,
        {{ start }} as period_start, {{ end }} as period_end,
        imr_{{ suffix }} as minsal_rate, imr_male_{{ suffix }} as minsal_rate_male, imr_female_{{ suffix }} as minsal_rate_female
    from minsal
    where imr_{{ suffix }} is not null
    {% if not loop.last %}union all{% endif %}
    {%- endfor %}
),

rates as (
    select * from {{ ref('fct_area_year_rates') }}
    where indicator = 'imr'
),

multiplier as (
    select multiplier from {{ ref('indicators') }} where indicator = 'imr'
),

build_years as (
    select distinct year from rates
),

-- The country is the whole of Chile only when every region of the reference is in the build
-- (as in fct_external_benchmarks).
regions as (
    select
        (select count(distinct region_code) from {{ ref('int_commune_year_counts') }}
            where region_code is not null) as in_build,
        (select count(distinct region_code) from {{ ref('stg_reference__communes') }}) as in_chile
),

-- The years of each MINSAL period the build holds (whatever the unit), and those it lacks.
period_year as (
    select period_start, period_end, unnest(generate_series(period_start, period_end)) as year
    from (select distinct period_start, period_end from minsal_periods) as periods
),

period_years as (
    select
        period_year.period_start,
        period_year.period_end,
        count(build_years.year) as years_in_build,
        min(build_years.year) as first_year_in_build,
        max(build_years.year) as last_year_in_build,
        string_agg(case when build_years.year is null then cast(period_year.year as varchar) end, ', '
            order by period_year.year) as years_not_in_build
    from period_year
    left join build_years on period_year.year = build_years.year
    group by period_year.period_start, period_year.period_end
),

pooled as (
    select
        minsal_periods.area_level,
        minsal_periods.area_code,
        minsal_periods.period_start,
        minsal_periods.period_end,
        max(rates.area_name) as area_name,
        max(rates.count_basis) as count_basis,
        count(rates.rate_per_1000) as n_years,
        sum(case when rates.rate_per_1000 is not null then rates.deaths end) as deaths,
        sum(case when rates.rate_per_1000 is not null then rates.live_births end) as live_births,
        count(rates.year) as area_years_in_build
    from minsal_periods
    left join rates
        on minsal_periods.area_level = rates.area_level
        and minsal_periods.area_code = rates.area_code
        and rates.year between minsal_periods.period_start and minsal_periods.period_end
    group by all
),

compared as (
    select
        minsal_periods.*,
        pooled.area_name,
        pooled.count_basis,
        pooled.n_years,
        pooled.deaths,
        pooled.live_births,
        period_years.first_year_in_build,
        period_years.last_year_in_build,
        period_years.years_not_in_build,
        case
            when period_years.years_in_build = 0 then 'no_year_in_build'
            when period_years.years_not_in_build is not null then 'build_lacks_years'
            else 'same_period'
        end as period_mismatch,
        case
            when minsal_periods.area_level = 'country' and regions.in_build < regions.in_chile then 'scope_not_national'
            when period_years.years_in_build = 0 then 'period_not_in_build'
            when pooled.area_years_in_build = 0 then 'area_not_in_build'
            when pooled.n_years = 0 or not pooled.live_births > 0 then 'rate_unavailable'
        end as unavailable_reason,
        multiplier.multiplier
    from minsal_periods
    cross join regions
    cross join multiplier
    inner join period_years
        on minsal_periods.period_start = period_years.period_start
        and minsal_periods.period_end = period_years.period_end
    inner join pooled
        on minsal_periods.area_level = pooled.area_level
        and minsal_periods.area_code = pooled.area_code
        and minsal_periods.period_start = pooled.period_start
        and minsal_periods.period_end = pooled.period_end
),

published as (
    select
        * exclude (n_years, deaths, live_births, count_basis),
        case when unavailable_reason is null then n_years end as n_years,
        case when unavailable_reason is null then deaths end as deaths,
        case when unavailable_reason is null then live_births end as live_births,
        case when unavailable_reason is null then count_basis end as count_basis,
        case when unavailable_reason is null then {{ rate('deaths', 'live_births', 'multiplier') }} end as rate_per_1000,
        case when unavailable_reason is null
            then {{ poisson_rate_limit('lower', 'deaths', 'live_births', 'multiplier') }} end as ci95_lower,
        case when unavailable_reason is null
            then {{ poisson_rate_limit('upper', 'deaths', 'live_births', 'multiplier') }} end as ci95_upper
    from compared
)

select
    area_level,
    area_code,
    coalesce(area_name, minsal_area_name) as area_name,
    minsal_area_name,
    'imr' as indicator,
    cast(period_start as integer) as minsal_period_start,
    cast(period_end as integer) as minsal_period_end,
    {{ year_span_label('period_start', 'period_end') }} as minsal_period_label,
    minsal_rate as minsal_rate_per_1000,
    minsal_rate_male as minsal_rate_male_per_1000,
    minsal_rate_female as minsal_rate_female_per_1000,
    period_mismatch,
    cast(case when period_mismatch <> 'no_year_in_build' then first_year_in_build end as integer) as period_start,
    cast(case when period_mismatch <> 'no_year_in_build' then last_year_in_build end as integer) as period_end,
    years_not_in_build,
    cast(n_years as integer) as n_years,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    rate_per_1000,
    ci95_lower,
    ci95_upper,
    rate_per_1000 / nullif(minsal_rate, 0) as rate_ratio,
    rate_per_1000 - minsal_rate as rate_difference_per_1000,
    minsal_rate between ci95_lower and ci95_upper as is_minsal_within_ci,
    abs(100.0 * (rate_per_1000 - minsal_rate) / nullif(minsal_rate, 0)) <= {{ tolerance }} as is_within_tolerance,
    count_basis,
    unavailable_reason
from published
