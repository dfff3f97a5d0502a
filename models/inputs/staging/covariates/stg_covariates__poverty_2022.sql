-- Income and multidimensional poverty 2022 by commune, one row per line of the file (two per
-- commune), typed and renamed. A value that does not parse as a number is kept as text and
-- audited (int_audit__covariates), never guessed.
with source as (
    select * from {{ source('covariates', 'poverty_2022_communes') }}
),

numbered as (
    -- DuckDB keeps file order (preserve_insertion_order); + 1 for the header line.
    select *, row_number() over () + 1 as source_line from source
)

select
    lpad(trim(codigo_comuna), 5, '0') as commune_code,
    trim(nombre_comuna) as commune_name,
    lpad(trim(codigo_region), 2, '0') as region_code,
    cast(anio as integer) as year,
    case trim(dimension)
        when 'ingresos' then 'income'
        when 'multidimensional' then 'multidimensional'
        else trim(dimension)
    end as poverty_dimension,
    trim(tasa) as value_text,
    try_cast(trim(tasa) as double) as value,
    try_cast(trim(limite_inferior) as double) as value_ci_lower,
    try_cast(trim(limite_superior) as double) as value_ci_upper,
    trim(metodologia) as methodology,
    trim(fuente) as source_institution,
    trim(url_fuente) as source_url,
    regexp_extract(filename, '[^/\\]+$') as source_file,
    source_line
from numbered
