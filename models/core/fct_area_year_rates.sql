-- Yearly rates per 1000 live births for every commune, region and (with several regions) the
-- country, with exact Poisson 95% limits. A count that cannot give a rate (see
-- audit_data_quality) has deaths, rate and limits null and says why in unavailable_reason.
with counts as (
    select * from {{ ref('int_area_year_counts') }}
),

usable as (
    select
        *,
        count_problem is null as is_usable
    from counts
)

select
    area_level,
    area_code,
    area_name,
    region_code,
    cast(year as integer) as year,
    indicator,
    cast(case when is_usable then deaths end as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    case when is_usable then {{ rate_per_1000('deaths', 'live_births') }} end as rate_per_1000,
    case when is_usable then {{ poisson_rate_limit('lower', 'deaths', 'live_births') }} end as ci95_lower,
    case when is_usable then {{ poisson_rate_limit('upper', 'deaths', 'live_births') }} end as ci95_upper,
    case when is_usable then deaths < {{ int_var('unreliable_below_deaths') }} end as is_unreliable,
    {% if bool_var('suppress_small_counts') %}
    coalesce(is_usable and deaths between {{ int_var('suppress_min_deaths') }} and {{ int_var('suppress_max_deaths') }}, false)
    {% else %}
    false
    {% endif %} as is_suppressed,
    count_basis,
    count_problem as unavailable_reason,
    cast(communes_unavailable as integer) as communes_unavailable
from usable
