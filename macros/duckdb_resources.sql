{#- Bound the build's memory by design: DuckDB spills to disk above `duckdb_memory_limit`
    instead of growing with the input (its own default is 80% of the machine's RAM). Runs at
    the start of every dbt invocation (on-run-start). -#}
{% macro apply_duckdb_resources() -%}
    {%- set limit = var('duckdb_memory_limit') | string -%}
    {%- if not modules.re.match('^[0-9]+(\.[0-9]+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$', limit, modules.re.IGNORECASE) -%}
        {{ exceptions.raise_compiler_error("dbt var duckdb_memory_limit must be a size such as '2GB' or '1500MB', got '" ~ limit ~ "'") }}
    {%- endif -%}
    set memory_limit = {{ sql_string(limit) }};
    {%- if var('duckdb_temp_directory') %}
    set temp_directory = {{ string_var('duckdb_temp_directory') }};
    {%- endif %}
{%- endmacro %}
