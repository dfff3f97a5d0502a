-- Audit rows (columns of audit_data_quality) of the comparison with UN IGME (docs/methods/comparisons.md, "External
-- anchors: UN IGME"):
--   igme_deaths_difference_exceeds_tolerance: a year whose national infant deaths differ from
--     UN IGME's by more than var external_deaths_tolerance_percent. The published rate stands
--     (the registry is the source; IGME smooths it): the row asks for that year's inputs to be
--     checked;
--   igme_value_missing: a year inside the 2020 round's span of an indicator (both sexes) whose
--     rate or deaths line is not in the file: fct_external_benchmarks publishes the IGME figure
--     (and the difference) as null, and this row says why and which file to complete.
with estimates as (
    select * from {{ ref('stg_un_igme__estimates_2020_round') }}
    where sex = 'bothsex'
),

spans as (
    select indicator, min(year) as first_year, max(year) as last_year, min(source_file) as source_file
    from estimates
    group by indicator
),

expected as (
    select spans.indicator, spans.source_file, spans.first_year, spans.last_year, measures.measure, years.year
    from spans
    cross join (values ('rate_per_1000'), ('deaths')) as measures (measure)
    cross join lateral (select unnest(range(spans.first_year, spans.last_year + 1)) as year) as years
),

missing as (
    select expected.*
    from expected
    left join estimates
        on expected.indicator = estimates.indicator
        and expected.measure = estimates.measure
        and expected.year = estimates.year
    where estimates.indicator is null
)

select
    'external_benchmarks' as source,
    cast(null as varchar) as source_file,
    cast(null as bigint) as source_line,
    'country=CL year=' || cast(year as varchar) || ' indicator=' || indicator as record_key,
    cast(null as varchar) as commune_code,
    year,
    indicator,
    'igme_deaths_difference_exceeds_tolerance' as check_name,
    'deaths=' || cast(country_deaths as varchar) || ' igme_deaths=' || cast(igme_deaths as varchar)
        || ' difference=' || cast(round(deaths_difference_percent, 1) as varchar) || '%' as observed_value,
    cast(1 as bigint) as records_affected,
    'none: the rate is published; check that year''s inputs against UN IGME' as consequence,
    false as affects_results
from {{ ref('fct_external_benchmarks') }}
where not is_deaths_within_tolerance

union all

select
    'external_benchmarks' as source,
    source_file,
    cast(null as bigint) as source_line,
    'country=CL year=' || cast(year as varchar) || ' indicator=' || indicator || ' measure=' || measure as record_key,
    cast(null as varchar) as commune_code,
    cast(year as integer) as year,
    indicator,
    'igme_value_missing' as check_name,
    'no bothsex ' || measure || ' line for ' || indicator || ' ' || cast(year as varchar)
        || ' (the file covers ' || indicator || ' ' || cast(first_year as varchar) || '-'
        || cast(last_year as varchar) || ')' as observed_value,
    cast(1 as bigint) as records_affected,
    'fct_external_benchmarks.igme_' || case measure when 'deaths' then 'deaths' else 'rate_per_1000' end
        || ' and the difference are null for that year; add the line to the file' as consequence,
    false as affects_results
from missing
