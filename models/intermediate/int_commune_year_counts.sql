-- Commune-year counts by indicator, whichever input mode fed them: the one place the marts
-- read counts from. `deaths` is kept as derived (possibly negative or missing); `count_problem`
-- says why a count cannot give a rate, and the marts turn that into an unavailable rate.
{% if vital_source() == 'ine_aggregates' %}
with counts as (
    select
        commune_code,
        commune_name,
        year,
        'imr' as indicator,
        infant_deaths_derived as deaths,
        live_births,
        'derived: INE deaths all ages - DEIS deaths aged 1+' as count_basis,
        case
            when deaths_all_ages is null then 'deaths_all_ages_missing'
            when deaths_aged_1_plus is null then 'deaths_aged_1_plus_missing'
            when infant_deaths_derived < 0 then 'negative_derived_count'
        end as source_problem
    from {{ ref('int_ine__commune_year_counts') }}
),
{% else %}
with counts as (
    select
        commune_code,
        commune_name,
        year,
        indicator,
        deaths,
        live_births,
        'DEIS microdata: death and birth records' as count_basis,
        cast(null as varchar) as source_problem
    from {{ ref('int_deis__commune_year_counts') }}
),
{% endif %}

communes as (
    select commune_code, commune_name, region_code
    from {{ ref('stg_reference__communes') }}
),

classified as (
    select
        counts.commune_code,
        coalesce(communes.commune_name, counts.commune_name) as commune_name,
        communes.region_code,
        counts.year,
        counts.indicator,
        counts.deaths,
        counts.live_births,
        counts.count_basis,
        case
            when communes.commune_code is null then 'commune_unknown'
            when counts.source_problem is not null then counts.source_problem
            when coalesce(counts.live_births, 0) = 0 then 'no_live_births'
        end as count_problem
    from counts
    left join communes on counts.commune_code = communes.commune_code
)

select *
from classified
-- Unknown communes have no region: keep them whatever the region scope, so they reach the audit.
where {{ in_scope('region_code', 'year') }}
    or (region_code is null and {{ in_year_scope('year') }})
