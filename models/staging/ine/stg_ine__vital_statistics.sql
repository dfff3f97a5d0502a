-- One row per commune, year and event as INE published it; codes padded to 5 characters.
with source as (
    select * from {{ source('ine', 'vital_statistics_rm') }}
)

select
    cast(anio as integer) as year,
    lpad(trim(codigo_comuna), 5, '0') as commune_code,
    trim(nombre_comuna) as commune_name,
    case trim(evento)
        when 'nacimiento' then 'live_birth'
        when 'defuncion' then 'death_all_ages'
        else trim(evento)
    end as event_type,
    trim(sexo) as sex,
    cast(cantidad as bigint) as event_count
from source
