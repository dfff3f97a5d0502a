-- A stratifier that ranks every commune with counts in an area splits the area's count
-- exactly: the five quintiles' deaths and births add up to the area's own deaths and births
-- (fct_area_year_rates for single years, fct_area_period_rates for analysis periods), in
-- every region, period and stratifier (e.g. the Metropolitana and income_poverty_2013).
-- Groups that leave out a commune with counts (Antártica has no 2022 poverty value) are not
-- covered by this promise. Rows returned are the groups that do not add up.
with membership as (
    select * from {{ ref('fct_commune_deprivation') }}
),

covering_groups as (
    select area_level, area_code, indicator, period_start, period_end, stratifier
    from membership
    group by area_level, area_code, indicator, period_start, period_end, stratifier
    having sum(case when is_ranked then 0 else abs(deaths + unpublished_deaths)
        + live_births + unpublished_live_births end) = 0
),

quintile_sums as (
    select area_level, area_code, indicator, period_start, period_end, period_kind, stratifier,
        sum(deaths) as deaths, sum(live_births) as live_births
    from {{ ref('fct_rates_by_quintile') }}
    group by area_level, area_code, indicator, period_start, period_end, period_kind, stratifier
),

area_counts as (
    select area_level, area_code, indicator, year as period_start, year as period_end,
        deaths, live_births
    from {{ ref('fct_area_year_rates') }}
    where area_level in ('region', 'country')
    union all
    select area_level, area_code, indicator, period_start, period_end, deaths, live_births
    from {{ ref('fct_area_period_rates') }}
)

select quintile_sums.*, area_counts.deaths as area_deaths, area_counts.live_births as area_live_births
from quintile_sums
inner join covering_groups using (area_level, area_code, indicator, period_start, period_end, stratifier)
left join area_counts using (area_level, area_code, indicator, period_start, period_end)
where quintile_sums.deaths is distinct from area_counts.deaths
    or quintile_sums.live_births is distinct from area_counts.live_births
