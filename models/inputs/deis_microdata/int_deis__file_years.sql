-- Microdata mode: which input file covers which year, from the records themselves (never from
-- the file names): one row per kind, year and file with its records and the first line of that
-- year. The one home of input coverage: int_deis__input_checks stops the build when two files of
-- one kind hold the same year (their records would be summed), and int_input__commune_year_counts
-- makes a year that no file of a kind covers unavailable (not zero).
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
