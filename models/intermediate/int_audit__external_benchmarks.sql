-- Audit rows (columns of audit_data_quality): a year whose national infant deaths differ from
-- UN IGME's by more than var external_deaths_tolerance_percent. The published rate stands (the
-- registry is the source; IGME smooths it): the row asks for that year's inputs to be checked.
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
