-- Commune-year counts by indicator, whichever input mode fed them: the one place the marts
-- read counts from. Every commune of every region present gets a row for every year and
-- indicator present, so a commune-year missing from the input is visible, not silently absent.
-- `deaths` is kept as derived (possibly negative or missing); `count_problem` says why a count
-- cannot give a rate, and the marts turn that into an unavailable rate.
with counts as (
    -- From the input mode's folder (dbt_project.yml enables one): models/intermediate/<mode>/.
    select * from {{ ref('int_input__commune_year_counts') }}
),

communes as (
    select commune_code, commune_name, region_code
    from {{ ref('stg_reference__communes') }}
),

regions_present as (
    select distinct communes.region_code
    from counts inner join communes on counts.commune_code = communes.commune_code
),

expected as (
    select communes.commune_code, communes.commune_name, communes.region_code, years.year, indicators.indicator
    from communes
    inner join regions_present on communes.region_code = regions_present.region_code
    cross join (select distinct year from counts) as years
    cross join (select distinct indicator from counts) as indicators
),

known_communes as (
    select
        expected.commune_code,
        expected.commune_name,
        expected.region_code,
        expected.year,
        expected.indicator,
        counts.deaths,
        counts.live_births,
        case when counts.commune_code is null then 'commune_year_missing' else counts.source_problem end
            as source_problem
    from expected
    left join counts
        on expected.commune_code = counts.commune_code
        and expected.year = counts.year
        and expected.indicator = counts.indicator
),

unknown_communes as (
    select
        counts.commune_code,
        counts.commune_name,
        cast(null as varchar) as region_code,
        counts.year,
        counts.indicator,
        counts.deaths,
        counts.live_births,
        'commune_unknown' as source_problem
    from counts
    left join communes on counts.commune_code = communes.commune_code
    where communes.commune_code is null
),

all_communes as (
    select * from known_communes
    union all
    select * from unknown_communes
)

select
    commune_code,
    commune_name,
    region_code,
    year,
    indicator,
    deaths,
    live_births,
    input_mode.count_basis,
    coalesce(source_problem, case when coalesce(live_births, 0) = 0 then 'no_live_births' end) as count_problem
from all_communes
cross join (select distinct count_basis from counts) as input_mode
-- Unknown communes have no region: keep them whatever the region scope, so they reach the audit.
where {{ in_scope('region_code', 'year') }}
    or (region_code is null and {{ in_year_scope('year') }})
