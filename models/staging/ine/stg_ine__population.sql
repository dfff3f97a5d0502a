with source as (
    select * from {{ source('ine', 'population_by_commune_year') }}
)

select
    lpad(trim(codigo_comuna), 5, '0') as commune_code,
    trim(nombre_comuna) as commune_name,
    cast(anio as integer) as year,
    cast(poblacion_total as bigint) as population_total,
    cast(poblacion_edad_0 as bigint) as population_aged_0,
    cast(mujeres_15_49 as bigint) as women_aged_15_49
from source
