-- Microdata mode: which input file covers which year, from the records themselves (never from
-- the file names): one row per kind, year and file with its records and the first line of that
-- year. The one home of input coverage: int_deis__input_checks stops the build when two files of
-- one kind hold the same year (their records would be summed), and int_input__commune_year_counts
-- makes a year that no file of a kind covers unavailable (not zero). Without a births file
-- (var deis_births_path empty) the bundled births by commune cover their years (2001-2016) that
-- the deaths cover too (births alone give no rate): one row per year with the births (not
-- records) it holds.
-- depends_on: {{ ref('stg_deis_aggregates__births_by_commune_year') }}
with deaths as not materialized (
    select * from {{ ref('stg_deis__deaths') }}
),

births as not materialized (
    select * from {{ ref('stg_deis__births') }}
)

select 'deaths' as kind, year_of_death as year, cast(source_file as varchar) as source_file,
    count(*) as records, min(source_line) as first_line
from deaths
where year_of_death is not null
group by year_of_death, source_file

union all

select 'births', birth_year, cast(source_file as varchar), count(*), min(source_line)
from births
where birth_year is not null
group by birth_year, source_file
{%- if deis_births_from_bundle() %}

union all

select 'births', year, {{ sql_string(deis_births_bundle_file()) }}, sum(live_births), min(source_line)
from {{ ref('stg_deis_aggregates__births_by_commune_year') }}
where year in (select year_of_death from deaths)
group by year
{%- endif %}
