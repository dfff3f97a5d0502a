-- Income and multidimensional poverty 2022 by commune, one row per line of the file (two per
-- commune), read strictly (macros/raw_text_files.sql) with its line number, typed and renamed.
-- A value that does not parse as a number (or a line without its 12 fields) is kept as text
-- and audited (int_audit__covariates), never guessed.
{% set header = 'codigo_region,codigo_comuna,nombre_comuna,anio,dimension,tasa,limite_inferior,'
    ~ 'limite_superior,metodologia,fuente,url_fuente,fecha_fuente' %}
with lines as (
    {{ raw_text_lines(source('covariates', 'poverty_2022_communes'), header) }}
),

checked as (
    select *, len(fields) = 12 as is_complete from lines
)

select
    {{ commune_code_or_text('fields[2]') }} as commune_code,
    trim(fields[3]) as commune_name,
    lpad(trim(fields[1]), 2, '0') as region_code,
    cast({{ whole_number('fields[4]', '4') }} as integer) as year,
    case trim(fields[5])
        when 'ingresos' then 'income'
        when 'multidimensional' then 'multidimensional'
        else trim(fields[5])
    end as poverty_dimension,
    case when is_complete then trim(fields[6]) else line end as value_text,
    case when is_complete then {{ decimal_number('fields[6]') }} end as value,
    case when is_complete then {{ decimal_number('fields[7]') }} end as value_ci_lower,
    case when is_complete then {{ decimal_number('fields[8]') }} end as value_ci_upper,
    trim(fields[9]) as methodology,
    trim(fields[10]) as source_institution,
    trim(fields[11]) as source_url,
    regexp_extract(source_file, '[^/\\]+$') as source_file,
    source_line
from checked
-- A blank line holds nothing (it keeps its place in the numbering).
where trim(line) <> ''
