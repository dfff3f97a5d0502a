-- The crosswalk validated by continuity (issue 42): in the bundled births 2001-2016 every
-- commune's series, read through seed commune_code_crosswalk, runs on across the year its code
-- changed and nowhere breaks. A missed or wrong pair would leave a commune with no births from or
-- until its recode year (or double another's), a jump of many standard deviations.
-- Rows returned are failures.
with births as (
    select commune_code, year, live_births
    from {{ ref('stg_deis_aggregates__births_by_commune_year') }}
),

-- Every current commune in every year of the bundle: a commune-year not listed had no births.
series as (
    select communes.codigo_comuna as commune_code, years.year, coalesce(births.live_births, 0) as live_births
    from {{ ref('communes_chile') }} as communes
    cross join (select distinct year from births) as years
    left join births on communes.codigo_comuna = births.commune_code and years.year = births.year
),

steps as (
    select
        commune_code,
        year,
        lag(live_births) over (partition by commune_code order by year) as births_before,
        live_births as births_after
    from series
),

scored as (
    select
        *,
        -- The change in Poisson standard deviations of the two years' sum.
        abs(births_after - births_before) / sqrt(greatest(births_after + births_before, 1)) as change_sd
    from steps
    where births_before is not null
),

-- The last year each recoded commune appears under an old code, and the step into the next year.
recodes as (
    select commune_code, max(year) as last_old_year
    from {{ ref('stg_deis_aggregates__births_by_commune_year') }}
    where commune_code_mapping = 'renumbered'
    group by commune_code
)

-- Across its recode, a commune's births move by at most 3 standard deviations (the largest seen
-- is 2.1: Mariquina 2006-2007, 303 and 357 births).
select 'recode step' as failure, scored.*
from scored
inner join recodes
    on scored.commune_code = recodes.commune_code and scored.year = recodes.last_old_year + 1
where scored.change_sd > 3

union all

-- Anywhere, a break is a step beyond 6 standard deviations and outside [2/3, 3/2] of the year
-- before. The four communes created in 2004 (Alto Hospicio 01107 from Iquique 01101, Hualpén
-- 08112 from Talcahuano 08110, Cholchol 09121, Alto Biobío 08314) take their births from their
-- mother communes over 2004-2005: real changes of territory, not codes, exempt up to 2005.
select 'series break', scored.*
from scored
where change_sd > 6
    and (births_after * 2 > births_before * 3 or births_after * 3 < births_before * 2)
    and not (year <= 2005 and commune_code in ('01107', '01101', '08112', '08110', '09121', '08314'))
