-- Microdata mode: deaths under one year and live births per commune of residence and year,
-- counted in one pass over each staging table. Records without a usable year or a known
-- commune cannot be assigned; they are left out here and totalled in audit_data_quality.
-- Historical codes (per-year bases) are counted under the current commune (seed
-- commune_code_crosswalk); the audit counts the records mapped per old code.
-- The input checks run first: a file whose lines were not all read, a malformed record (by
-- default) or two births files of one year stop the build there.
-- depends_on: {{ ref('int_deis__input_checks') }}

with assignable_deaths as (
    select
        commune_code,
        year_of_death as year,
        -- A death with a blank or unknown age unit is never read as years; by default it is in no
        -- infant indicator (deis_columns.sql, methods.md).
        case
            when age_class = 'age_unit_unknown' and {{ deis_unknown_unit_is_infant() }} then 'infant_age_unknown'
            else age_class
        end as age_class
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

births as (
    select commune_code, birth_year as year, count(*) as live_births
    from {{ ref('stg_deis__births') }}
    where {{ deis_is_assignable('record_problem', 'birth_year') }}
    group by commune_code, birth_year
),

commune_years as (
    select
        coalesce(births.commune_code, deaths.commune_code) as commune_code,
        coalesce(births.year, deaths.year) as year,
        coalesce(births.live_births, 0) as live_births,
        coalesce(deaths.early_neonatal_deaths, 0) as early_neonatal_deaths,
        coalesce(deaths.late_neonatal_deaths, 0) as late_neonatal_deaths,
        coalesce(deaths.post_neonatal_deaths, 0) as post_neonatal_deaths,
        coalesce(deaths.age_unknown_infant_deaths, 0) as age_unknown_infant_deaths
    from births
    full outer join deaths
        on births.commune_code = deaths.commune_code and births.year = deaths.year
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
-- imr = nmr + pnmr + age_unknown_infant and nmr = enmr + late neonatal can be tested.
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
    age_unknown_infant_deaths
from indicators
