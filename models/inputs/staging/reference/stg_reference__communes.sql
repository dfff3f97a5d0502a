-- The 346 communes of the 2018 political-administrative division, with region and province.
select
    codigo_comuna as commune_code,
    nombre_comuna as commune_name,
    codigo_provincia as province_code,
    nombre_provincia as province_name,
    codigo_region as region_code,
    nombre_region as region_name,
    poblacion_estimada as population_estimate
from {{ ref('communes_chile') }}
