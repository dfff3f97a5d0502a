-- Bundled-data mode: infant deaths by commune and year are DERIVED as
-- INE deaths of all ages minus DEIS deaths aged 1+ (the only real commune-level source here).
-- The difference is kept signed: a negative value is a data error reported downstream, not clamped.
with ine as (
    select
        year,
        commune_code,
        max(commune_name) as commune_name,
        sum(case when event_type = 'live_birth' then event_count end) as live_births,
        sum(case when event_type = 'death_all_ages' then event_count end) as deaths_all_ages
    from {{ ref('stg_ine__vital_statistics') }}
    where sex = 'total'
    group by year, commune_code
),

deis_aged_1_plus as (
    select commune_code, year, sum(deaths) as deaths_aged_1_plus
    from {{ ref('stg_deis_aggregates__deaths_by_age_group') }}
    where age_group = '1+'
    group by commune_code, year
)

select
    ine.year,
    ine.commune_code,
    ine.commune_name,
    ine.live_births,
    ine.deaths_all_ages,
    deis_aged_1_plus.deaths_aged_1_plus,
    ine.deaths_all_ages - deis_aged_1_plus.deaths_aged_1_plus as infant_deaths_derived
from ine
left join deis_aged_1_plus
    on ine.commune_code = deis_aged_1_plus.commune_code
    and ine.year = deis_aged_1_plus.year
