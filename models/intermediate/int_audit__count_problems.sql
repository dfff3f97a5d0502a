-- One audit row per commune-year count that cannot give a rate, in either input mode.
with problems as (
    select * from {{ ref('int_commune_year_counts') }}
    where count_problem is not null
)

select
    'commune_year_counts' as source,
    cast(null as varchar) as source_file,
    cast(null as bigint) as source_line,
    'commune=' || commune_code || ' year=' || cast(year as varchar) || ' indicator=' || indicator as record_key,
    commune_code,
    year,
    indicator,
    count_problem as check_name,
    'deaths=' || coalesce(cast(deaths as varchar), 'missing')
        || ' live_births=' || coalesce(cast(live_births as varchar), 'missing') as observed_value,
    cast(1 as bigint) as records_affected,
    case count_problem
        when 'commune_unknown' then 'commune code not in the 346-commune reference: no rate, not in any region'
        else 'rate unavailable for this commune-year; left out of pooled comparisons and trend fits'
    end as consequence,
    true as affects_results
from problems
