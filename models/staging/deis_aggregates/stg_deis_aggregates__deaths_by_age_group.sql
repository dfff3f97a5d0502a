-- DEIS deaths by commune, year, sex and (overlapping) age group. The integer commune code
-- lost its leading zero for regions 01-09: pad it back to the 5-character CUT code.
with source as (
    select * from {{ source('deis_aggregates', 'deaths_by_age_group') }}
)

select
    lpad(trim("CODIGO_COMUNA_RESIDENCIA"), 5, '0') as commune_code,
    cast("Year" as integer) as year,
    trim("Gender") as sex,
    trim("Age group") as age_group,
    cast("Death_count_all_cause" as bigint) as deaths,
    cast("Mean_age" as double) as mean_age_years
from source
