-- Commune-year counts by indicator, whichever input mode fed them: the one place the marts
-- read counts from. Every commune of every region present gets a row for every year and
-- indicator present, so a commune-year missing from the input is visible, not silently absent.
-- `deaths` is kept as derived (possibly negative or missing); `count_problem` says why a count
-- cannot give a rate, and the marts turn that into an unavailable rate.
{% if vital_source() == 'ine_aggregates' %}
    {% set count_basis = 'derived: INE deaths all ages - DEIS deaths aged 1+' %}
with counts as (
    select
        commune_code,
        commune_name,
        year,
        'imr' as indicator,
        infant_deaths_derived as deaths,
        live_births,
        case
            when live_births is null then 'live_births_missing'
            when deaths_all_ages is null then 'deaths_all_ages_missing'
            when deaths_aged_1_plus is null then 'deaths_aged_1_plus_missing'
            when infant_deaths_derived < 0 then 'negative_derived_count'
        end as source_problem
    from {{ ref('int_ine__commune_year_counts') }}
),
{% else %}
    {% set count_basis = deis_count_basis() %}
with counts as (
    select
        commune_code,
        commune_name,
        year,
        indicator,
        deaths,
        live_births,
        cast(null as varchar) as source_problem
    from {{ ref('int_deis__commune_year_counts') }}
),
{% endif %}

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
        {% if vital_source() == 'ine_aggregates' %}
        counts.deaths,
        counts.live_births,
        case when counts.commune_code is null then 'commune_year_missing' else counts.source_problem end
            as source_problem
        {% else %}
        -- In the microdata a commune-year with no record at all had no births and no deaths.
        coalesce(counts.deaths, 0) as deaths,
        coalesce(counts.live_births, 0) as live_births,
        counts.source_problem
        {% endif %}
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
    '{{ count_basis }}' as count_basis,
    coalesce(source_problem, case when coalesce(live_births, 0) = 0 then 'no_live_births' end) as count_problem
from all_communes
-- Unknown communes have no region: keep them whatever the region scope, so they reach the audit.
where {{ in_scope('region_code', 'year') }}
    or (region_code is null and {{ in_year_scope('year') }})
