-- Bundled-data mode: infant deaths by commune and year are DERIVED as
-- INE deaths of all ages minus DEIS deaths aged 1+ (the only real commune-level source here).
-- The difference is kept signed: a negative value is a data error reported downstream, not clamped.
-- Keys are unique already (staging stops the build otherwise), so each sum below adds at most
-- one row per sex or event; a value that could not be read makes the sum null, never smaller.
-- A commune-year the DEIS file does not list had no death aged 1+ there: zero, not missing.
with ine_rows as (
    select * from {{ ref('stg_ine__vital_statistics') }}
    where year is not null and commune_code is not null and event_type is not null and sex = 'total'
),

deis_rows as (
    select * from {{ ref('stg_deis_aggregates__deaths_by_age_group') }}
),

ine as (
    select
        year,
        commune_code,
        max(commune_name) as commune_name,
        case when count(case when event_type = 'live_birth' then event_count end) = 1
            then sum(case when event_type = 'live_birth' then event_count end) end as live_births,
        case when count(case when event_type = 'death_all_ages' then event_count end) = 1
            then sum(case when event_type = 'death_all_ages' then event_count end) end as deaths_all_ages
    from ine_rows
    group by year, commune_code
),

-- Per commune, year and sex: the 1+ group contains the others (18+, 75+), so a sex with an
-- 18+ or 75+ row but no 1+ row lost its 1+ row, and the groups must nest. A sex with no row at
-- all had no death aged 1+ (DEIS lists no zero rows; 218 real commune-years have one sex only).
deis_by_sex as (
    select
        commune_code,
        year,
        sex,
        count(case when age_group = '1+' then 1 end) as rows_1_plus,
        sum(case when age_group = '1+' then deaths end) as deaths_1_plus,
        sum(case when age_group = '18+' then deaths end) as deaths_18_plus,
        sum(case when age_group = '75+' then deaths end) as deaths_75_plus,
        count(case when deaths is null and age_group = '1+' then 1 end) as unreadable_1_plus
    from deis_rows
    where commune_code is not null and year is not null and sex is not null and age_group is not null
    group by commune_code, year, sex
),

deis_sex_checked as (
    select
        *,
        case
            when unreadable_1_plus > 0 then 'deis_row_unreadable'
            when rows_1_plus = 0 then 'deis_1_plus_row_missing'
            when deaths_1_plus < coalesce(deaths_18_plus, 0)
                or coalesce(deaths_18_plus, deaths_1_plus) < coalesce(deaths_75_plus, 0)
                then 'deis_age_groups_inconsistent'
        end as deis_problem
    from deis_by_sex
),

deis_aged_1_plus as (
    select
        commune_code,
        year,
        case when count(deis_problem) = 0 then sum(deaths_1_plus) end as deaths_aged_1_plus,
        min(deis_problem) as deis_problem
    from deis_sex_checked
    group by commune_code, year
),

-- A line whose key could not be read (commune, year, sex or age group malformed) may hold deaths
-- aged 1+ of any commune-year its readable parts match: those commune-years cannot be derived.
-- A line of a year outside the window (vars input_year_min, input_year_max) is outside it: it
-- belongs to no commune-year inside.
deis_unattributable as (
    select distinct commune_code, year
    from deis_rows
    where parse_problem is not null and parse_problem not in ('blank_line', 'year_outside_window')
        and (commune_code is null or year is null or sex is null or age_group is null)
        and (age_group = '1+' or age_group is null)
),

deis_years as (
    select distinct year from deis_rows where year is not null
),

ine_with_deis as (
    select
        ine.*,
        deis_years.year is not null as deis_has_year,
        deis_aged_1_plus.deaths_aged_1_plus,
        deis_aged_1_plus.deis_problem,
        deis_aged_1_plus.commune_code is null as is_missing_from_deis,
        exists(
            select 1 from deis_unattributable as u
            where coalesce(u.commune_code, ine.commune_code) = ine.commune_code
                and coalesce(u.year, ine.year) = ine.year
        ) as has_unattributable_deis_line
    from ine
    left join deis_years on ine.year = deis_years.year
    left join deis_aged_1_plus
        on ine.commune_code = deis_aged_1_plus.commune_code
        and ine.year = deis_aged_1_plus.year
),

derived as (
    select
        year,
        commune_code,
        commune_name,
        live_births,
        deaths_all_ages,
        case
            when not deis_has_year or deis_problem is not null or has_unattributable_deis_line then null
            else coalesce(deaths_aged_1_plus, 0)
        end as deaths_aged_1_plus,
        case
            when live_births is null then 'live_births_missing'
            when deaths_all_ages is null then 'deaths_all_ages_missing'
            when not deis_has_year then 'deis_year_missing'
            when deis_problem is not null then deis_problem
            when has_unattributable_deis_line then 'deis_row_unattributable'
        end as input_problem,
        is_missing_from_deis
    from ine_with_deis
)

select
    year,
    commune_code,
    commune_name,
    live_births,
    deaths_all_ages,
    deaths_aged_1_plus,
    deaths_all_ages - deaths_aged_1_plus as infant_deaths_derived,
    input_problem,
    is_missing_from_deis
from derived
