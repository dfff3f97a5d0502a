-- Audit rows for the covariates: every unusable covariate line, and every commune in scope
-- that a stratifier leaves out. A commune without a value is left out of that stratifier's
-- ranking and counted (fct_inequality.n_communes_without_value); a region where a stratifier
-- has no value at all gets no measures for it (nor does the country, unless every region in
-- scope has values): one row per such region says so.
with stratifier_values as (
    select * from {{ ref('int_stratifier_values') }}
),

communes_in_scope as (
    select distinct commune_code, commune_name, region_code
    from {{ ref('int_commune_year_counts') }}
    where region_code is not null
),

usable as (
    select * from stratifier_values where problem is null
),

stratifiers as (
    select distinct stratifier from stratifier_values where stratifier is not null
),

regions_covered as (
    select distinct stratifier, region_code from usable
),

expected as (
    select stratifiers.stratifier, communes_in_scope.*
    from stratifiers cross join communes_in_scope
),

missing as (
    select expected.*, regions_covered.region_code is not null as region_is_covered
    from expected
    left join usable
        on expected.stratifier = usable.stratifier and expected.commune_code = usable.commune_code
    left join regions_covered
        on expected.stratifier = regions_covered.stratifier and expected.region_code = regions_covered.region_code
    where usable.commune_code is null
)

select
    'covariates' as source,
    source_file,
    source_line,
    'stratifier=' || coalesce(stratifier, 'unknown') || ' commune=' || commune_code as record_key,
    commune_code,
    cast(null as integer) as year,
    cast(null as varchar) as indicator,
    'covariate_' || problem as check_name,
    'value=' || coalesce(value_text, 'missing') as observed_value,
    cast(1 as bigint) as records_affected,
    'covariate line not used: the commune is left out of this stratifier' as consequence,
    true as affects_results
from stratifier_values
where problem is not null

union all

select
    'covariates',
    cast(null as varchar),
    cast(null as bigint),
    'stratifier=' || stratifier || ' commune=' || commune_code,
    commune_code,
    cast(null as integer),
    cast(null as varchar),
    'covariate_value_missing',
    'no usable value for ' || commune_name,
    cast(1 as bigint),
    'left out of this stratifier''s ranking, quintiles and measures in every area,'
    || ' and counted in fct_inequality.n_communes_without_value',
    true
from missing
where region_is_covered

union all

select
    'covariates',
    cast(null as varchar),
    cast(null as bigint),
    'stratifier=' || stratifier || ' region=' || region_code,
    cast(null as varchar),
    cast(null as integer),
    cast(null as varchar),
    'stratifier_not_available_for_region',
    'no value for any of the ' || cast(count(*) as varchar) || ' communes of region ' || region_code,
    cast(count(*) as bigint),
    'no inequality measures by this stratifier for this region, nor for the country',
    false
from missing
where not region_is_covered
group by stratifier, region_code
