{#- Staging of a headerless two-column covariate file (commune code, value), as read by its
    source: one row per line, the line number, the value typed. A value that does not parse is
    kept as text and audited (int_audit__covariates), never guessed. -#}
{% macro stage_headerless_covariate(source_relation) -%}
with source as (
    select * from {{ source_relation }}
),

numbered as (
    -- DuckDB keeps file order (preserve_insertion_order), so this is the line number.
    select *, row_number() over () as source_line from source
)

select
    lpad(trim(commune_code), 5, '0') as commune_code,
    trim(value) as value_text,
    try_cast(trim(value) as double) as value,
    regexp_extract(filename, '[^/\\]+$') as source_file,
    source_line
from numbered
{%- endmacro %}
