-- The share of infant deaths from causes reducible by health care, per area (commune, region,
-- country) and analysis period (docs/methods/causes.md): the Brazilian list of avoidable causes
-- of death in children under 5 (seed reducible_causes_under5), with an exact Clopper-Pearson
-- interval. The share's denominator is the infant deaths with an ICD-10 cause (coded); deaths
-- with a blank or unusable cause are counted beside it, never in it. The list is ICD-10 only, so
-- a period holding an ICD-9 year has counts and no share. The bundled aggregates carry no
-- causes: no rows in that mode.
{% set reducible_groups = ['immunisation', 'pregnancy_care', 'delivery_care', 'newborn_care',
                           'diagnosis_treatment', 'health_promotion'] %}
{% set other_groups = ['ill_defined', 'not_clearly_avoidable'] %}
with causes as (
    select * from {{ ref('int_input__infant_death_causes') }}
),

-- The commune-years in scope whose infant deaths are counted (a year no deaths file holds has
-- none); their imr deaths are the total every cause count below must add up to.
counted as (
    select commune_code, region_code, year, deaths as infant_deaths
    from {{ ref('int_commune_year_counts') }}
    where indicator = 'imr' and deaths is not null and region_code is not null
        {% if vital_source() != 'deis_microdata' %}and false{% endif %}
),

commune_years as (
    select
        counted.commune_code,
        counted.region_code,
        counted.year,
        counted.infant_deaths,
        coalesce(sum(causes.deaths) filter (where causes.cause_status = 'cause_unknown'), 0) as cause_unknown_deaths,
        coalesce(sum(causes.deaths) filter (where causes.cause_status = 'cause_invalid'), 0) as cause_invalid_deaths,
        coalesce(sum(causes.deaths) filter (where causes.cause_status = 'coded' and causes.icd_revision = 9), 0)
            as icd9_coded_deaths,
        {%- for group in reducible_groups + other_groups %}
        coalesce(sum(causes.deaths) filter (where causes.reducible_group = '{{ group }}'), 0) as {{ group }}_deaths,
        {%- endfor %}
        coalesce(sum(causes.deaths) filter (where causes.is_reducible), 0) as reducible_deaths
    from counted
    left join causes on counted.commune_code = causes.commune_code and counted.year = causes.year
    group by counted.commune_code, counted.region_code, counted.year, counted.infant_deaths
),

-- The region-years and country-years with a rate (core's int_area_commune_years, the one
-- availability rule of every aggregate of communes, issue 41): only they are summed, so an
-- area-year with a commune missing is no silently smaller sum, and a period pools the years
-- fct_area_period_rates pools.
available_areas as (
    select distinct area_level, area_code, year from {{ ref('int_area_commune_years') }}
    where indicator = 'imr' and area_is_available
),

{#- The counts summed over areas and years. -#}
{% set count_columns = ['infant_deaths', 'cause_unknown_deaths', 'cause_invalid_deaths', 'icd9_coded_deaths'] %}
{% for group in reducible_groups + other_groups %}{% do count_columns.append(group ~ '_deaths') %}{% endfor %}
{% do count_columns.append('reducible_deaths') %}

area_years as (
    select
        'commune' as area_level,
        commune_code as area_code,
        region_code,
        year,
        {%- for column in count_columns %}
        {{ column }}{{ "," if not loop.last }}
        {%- endfor %}
    from commune_years
    union all
    select
        'region' as area_level,
        region_code as area_code,
        region_code,
        year,
        {%- for column in count_columns %}
        sum({{ column }}) as {{ column }}{{ "," if not loop.last }}
        {%- endfor %}
    from commune_years
    where exists (select 1 from available_areas
        where available_areas.area_level = 'region' and available_areas.area_code = commune_years.region_code
            and available_areas.year = commune_years.year)
    group by region_code, year
    union all
    select
        'country' as area_level,
        'CL' as area_code,
        cast(null as varchar) as region_code,
        year,
        {%- for column in count_columns %}
        sum({{ column }}) as {{ column }}{{ "," if not loop.last }}
        {%- endfor %}
    from commune_years
    where exists (select 1 from available_areas
        where available_areas.area_level = 'country' and available_areas.year = commune_years.year)
    group by year
),

pooled as (
    select
        area_years.area_level,
        area_years.area_code,
        area_years.region_code,
        periods.period_start,
        periods.period_end,
        periods.period_label,
        count(*) as n_years,
        bool_or(area_years.year < {{ deis_icd10_first_year() }}) as has_icd9_years,
        {%- for column in count_columns %}
        sum(area_years.{{ column }}) as {{ column }}{{ "," if not loop.last }}
        {%- endfor %}
    from area_years
    inner join {{ ref('int_analysis_periods') }} as periods
        on area_years.year between periods.period_start and periods.period_end
    group by all
),

{% set classified -%}
    {%- for group in reducible_groups + other_groups %}
            {{ "+ " if not loop.first }}{{ group }}_deaths
    {%- endfor %}
{%- endset %}
shared as (
    select
        *,
        ({{ classified }}
        ) as classified_deaths,
        case
            when has_icd9_years then 'period_has_icd9_years'
            when ({{ classified }}
            ) = 0 then 'no_classified_deaths'
        end as unavailable_reason
    from pooled
),

names as (
    select distinct 'commune' as area_level, commune_code as area_code, commune_name as area_name
    from {{ ref('stg_reference__communes') }}
    union all
    select distinct 'region', region_code, region_name
    from {{ ref('stg_reference__communes') }}
    union all
    select 'country', 'CL', 'Chile'
)

select
    shared.area_level,
    shared.area_code,
    names.area_name,
    shared.region_code,
    cast(shared.period_start as integer) as period_start,
    cast(shared.period_end as integer) as period_end,
    shared.period_label,
    cast(shared.n_years as integer) as n_years,
    {%- for column in count_columns %}
    cast(shared.{{ column }} as bigint) as {{ column }},
    {%- endfor %}
    cast(shared.classified_deaths as bigint) as classified_deaths,
    case when shared.unavailable_reason is null then shared.reducible_deaths / shared.classified_deaths end
        as reducible_share,
    case when shared.unavailable_reason is null
        then imr_binomial_lower(shared.reducible_deaths, shared.classified_deaths, 0.95) end as reducible_share_ci95_lower,
    case when shared.unavailable_reason is null
        then imr_binomial_upper(shared.reducible_deaths, shared.classified_deaths, 0.95) end as reducible_share_ci95_upper,
    shared.unavailable_reason
from shared
left join names on shared.area_level = names.area_level and shared.area_code = names.area_code
