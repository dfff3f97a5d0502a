{#- Staging of a headerless two-column covariate file (commune code, value), as read by its
    source: one row per line, read strictly (macros/raw_text_files.sql) with its line number,
    the value typed. A value that does not parse (a decimal comma, a third field, `1e3`) is kept
    as text and audited (int_audit__covariates), never guessed. -#}
{% macro stage_headerless_covariate(source_relation) -%}
with lines as (
    {{ raw_text_lines(source_relation) }}
)

select
    {{ commune_code_or_text('fields[1]') }} as commune_code,
    -- Everything after the first comma: `6,4` (a decimal comma) is shown as written.
    trim(array_to_string(fields[2:], ',')) as value_text,
    case when len(fields) = 2 then {{ decimal_number('fields[2]') }} end as value,
    regexp_extract(source_file, '[^/\\]+$') as source_file,
    source_line
from lines
-- A blank line holds nothing (it keeps its place in the numbering); before, it became a row
-- without a commune code that stopped the build through a not_null test naming no line.
where trim(line) <> ''
{%- endmacro %}
