-- Microdata mode: deaths under one year and live births per commune of residence and year,
-- counted in one pass over each staging table. Records without a usable year or a known
-- commune cannot be assigned; they are left out here and totalled in audit_data_quality.
-- Historical codes (per-year bases) are counted under the current commune (seed
-- commune_code_crosswalk); the audit counts the records mapped per old code.
-- The input checks run first: a file whose lines were not all read, a malformed record (by
-- default) or two births files of one year stop the build there.
-- depends_on: {{ ref('int_deis__input_checks') }}
-- depends_on: {{ ref('stg_deis_aggregates__births_by_commune_year') }}
-- depends_on: {{ ref('int_deis__file_years') }}

with assignable_deaths as (
    select
        commune_code,
        year_of_death as year,
        -- A death with a blank or unknown age unit is never read as years; by default it is in no
        -- infant indicator (deis_columns.sql, docs/methods/inputs.md, "DEIS record-level files: what is counted").
        {{ deis_counted_age_class('age_class') }} as age_class
    from {{ ref('stg_deis__deaths') }}
    where {{ deis_is_assignable('record_problem', 'year_of_death') }}
),

deaths as (
    select
        commune_code,
        year,
        sum(case when age_class = 'early_neonatal' then 1 else 0 end) as early_neonatal_deaths,
        sum(case when age_class = 'late_neonatal' then 1 else 0 end) as late_neonatal_deaths,
        sum(case when age_class = 'post_neonatal' then 1 else 0 end) as post_neonatal_deaths,
        sum(case when age_class = 'infant_age_unknown' then 1 else 0 end) as age_unknown_infant_deaths
    from assignable_deaths
    group by commune_code, year
),

-- Infant deaths by cause group (int_deis__infant_deaths, docs/methods/causes.md), counted from
-- the classified records: the test infant_deaths_are_the_cause_groups_plus_unknown_and_invalid
-- checks them against the age classes above, a second count of the same deaths.
{% set cause_groups = ['perinatal', 'congenital', 'respiratory', 'infectious', 'external', 'ill_defined', 'other'] %}
causes as (
    select
        commune_code,
        year,
        {%- for group in cause_groups %}
        count(*) filter (where cause_group = '{{ group }}') as {{ group }}_cause_deaths,
        {%- endfor %}
        count(*) filter (where cause_status = 'cause_unknown') as cause_unknown_deaths,
        count(*) filter (where cause_status = 'cause_invalid') as cause_invalid_deaths
    from {{ ref('int_deis__infant_deaths') }}
    group by commune_code, year
),

births as (
    select commune_code, birth_year as year, count(*) as live_births
    from {{ ref('stg_deis__births') }}
    where {{ deis_is_assignable('record_problem', 'birth_year') }}
    group by commune_code, birth_year
    {%- if deis_births_from_bundle() %}
    -- No births file: the bundled births by commune (real, 2001-2016; every line read, or its
    -- test has stopped the build), counted under the current commune through the crosswalk, in
    -- the years the deaths cover (int_deis__file_years) and the regions they hold: as with files
    -- of both kinds, a region without any death record is not in the input (a regional extract),
    -- and its births alone would make zero deaths of it.
    union all
    select bundle.commune_code, bundle.year, bundle.live_births
    from {{ ref('stg_deis_aggregates__births_by_commune_year') }} as bundle
    inner join {{ ref('stg_reference__communes') }} as communes on bundle.commune_code = communes.commune_code
    where bundle.year in (select year from {{ ref('int_deis__file_years') }} where kind = 'births')
        and communes.region_code in (
            select death_communes.region_code
            from deaths
            inner join {{ ref('stg_reference__communes') }} as death_communes
                on deaths.commune_code = death_communes.commune_code
        )
    {%- endif %}
),

commune_years as (
    select
        coalesce(births.commune_code, deaths.commune_code) as commune_code,
        coalesce(births.year, deaths.year) as year,
        coalesce(births.live_births, 0) as live_births,
        coalesce(deaths.early_neonatal_deaths, 0) as early_neonatal_deaths,
        coalesce(deaths.late_neonatal_deaths, 0) as late_neonatal_deaths,
        coalesce(deaths.post_neonatal_deaths, 0) as post_neonatal_deaths,
        coalesce(deaths.age_unknown_infant_deaths, 0) as age_unknown_infant_deaths,
        {%- for group in cause_groups %}
        coalesce(causes.{{ group }}_cause_deaths, 0) as {{ group }}_cause_deaths,
        {%- endfor %}
        coalesce(causes.cause_unknown_deaths, 0) as cause_unknown_deaths,
        coalesce(causes.cause_invalid_deaths, 0) as cause_invalid_deaths
    from births
    full outer join deaths
        on births.commune_code = deaths.commune_code and births.year = deaths.year
    left join causes
        on coalesce(births.commune_code, deaths.commune_code) = causes.commune_code
        and coalesce(births.year, deaths.year) = causes.year
),

components as (
    select
        *,
        early_neonatal_deaths + late_neonatal_deaths as neonatal_deaths,
        early_neonatal_deaths + late_neonatal_deaths + post_neonatal_deaths + age_unknown_infant_deaths
            as infant_deaths
    from commune_years
),

-- One row per indicator, the shape every mart reads: the seed `indicators` names each
-- indicator's count column (count_column), so adding an indicator whose count exists here is a
-- seed row. The components ride along on every row so that the identities
-- imr = nmr + pnmr + age_unknown_infant, nmr = enmr + late neonatal and imr = the cause groups +
-- unknown + invalid causes can be tested.
count_columns as (
    select *
    from (select * exclude (live_births) from components) as death_counts
    unpivot include nulls (deaths for count_column in (columns(* exclude (commune_code, year))))
),

indicators as (
    select seed.indicator, count_columns.deaths, components.*
    from count_columns
    inner join {{ ref('indicators') }} as seed on count_columns.count_column = seed.count_column
    inner join components
        on count_columns.commune_code = components.commune_code and count_columns.year = components.year
)

select
    commune_code,
    cast(null as varchar) as commune_name,
    year,
    indicator,
    deaths,
    live_births,
    infant_deaths,
    neonatal_deaths,
    early_neonatal_deaths,
    late_neonatal_deaths,
    post_neonatal_deaths,
    age_unknown_infant_deaths,
    {%- for group in cause_groups %}
    {{ group }}_cause_deaths,
    {%- endfor %}
    cause_unknown_deaths,
    cause_invalid_deaths
from indicators
