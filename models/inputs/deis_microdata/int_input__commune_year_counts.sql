-- Microdata mode's counts in the shape int_commune_year_counts reads (one row per commune, year
-- and indicator). The microdata have one record per event, so a commune-year without any record
-- had no births and no deaths: every commune of a region with records gets a row for every year
-- and indicator present, with zeros where nothing happened -- but only in a year that some file
-- of that kind covers (int_deis__file_years). A year with births and no deaths file holding it
-- is not a year without deaths: its deaths are missing (deaths_input_missing_year), and so are
-- the births of a year no births file holds (births_input_missing_year).
with counts as (
    select * from {{ ref('int_deis__commune_year_counts') }}
),

covered as (
    select distinct kind, year from {{ ref('int_deis__file_years') }}
),

years as (
    select distinct year from counts
),

grid as (
    {{ commune_year_grid('counts', 'years') }}
)

-- Full join: a code outside the reference list (none today: such records are not assignable)
-- would still reach int_commune_year_counts, which audits it as commune_unknown.
select
    coalesce(grid.commune_code, counts.commune_code) as commune_code,
    cast(null as varchar) as commune_name,
    coalesce(grid.year, counts.year) as year,
    coalesce(grid.indicator, counts.indicator) as indicator,
    case when deaths_covered.year is not null then cast(coalesce(counts.deaths, 0) as bigint) end as deaths,
    case when births_covered.year is not null then cast(coalesce(counts.live_births, 0) as bigint) end as live_births,
    case
        when deaths_covered.year is null then 'deaths_input_missing_year'
        when births_covered.year is null then 'births_input_missing_year'
    end as source_problem,
    {{ sql_string(deis_count_basis()) }} as count_basis
from grid
full outer join counts
    on grid.commune_code = counts.commune_code
    and grid.year = counts.year
    and grid.indicator = counts.indicator
left join covered as deaths_covered
    on deaths_covered.kind = 'deaths' and deaths_covered.year = coalesce(grid.year, counts.year)
left join covered as births_covered
    on births_covered.kind = 'births' and births_covered.year = coalesce(grid.year, counts.year)
