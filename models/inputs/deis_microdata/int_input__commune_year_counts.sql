-- Microdata mode's counts in the shape int_commune_year_counts reads (one row per commune, year
-- and indicator). The microdata have one record per event, so a commune-year without any record
-- had no births and no deaths: every commune of a region with records gets a row for every year
-- and indicator present, with zeros where nothing happened.
with counts as (
    select * from {{ ref('int_deis__commune_year_counts') }}
),

communes as (
    select commune_code, region_code from {{ ref('stg_reference__communes') }}
),

grid as (
    select communes.commune_code, years.year, indicators.indicator
    from communes
    cross join (select distinct year from counts) as years
    cross join (select distinct indicator from counts) as indicators
    where communes.region_code in (
        select communes.region_code
        from counts inner join communes on counts.commune_code = communes.commune_code
    )
)

-- Full join: a code outside the reference list (none today: such records are not assignable)
-- would still reach int_commune_year_counts, which audits it as commune_unknown.
select
    coalesce(grid.commune_code, counts.commune_code) as commune_code,
    cast(null as varchar) as commune_name,
    coalesce(grid.year, counts.year) as year,
    coalesce(grid.indicator, counts.indicator) as indicator,
    cast(coalesce(counts.deaths, 0) as bigint) as deaths,
    cast(coalesce(counts.live_births, 0) as bigint) as live_births,
    cast(null as varchar) as source_problem,
    {{ sql_string(deis_count_basis()) }} as count_basis
from grid
full outer join counts
    on grid.commune_code = counts.commune_code
    and grid.year = counts.year
    and grid.indicator = counts.indicator
