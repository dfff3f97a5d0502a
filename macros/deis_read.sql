{#-
    Read the DEIS microdata files named by var('deis_<kind>_path') (kind: deaths or births): a
    file, a folder, a glob or a published ZIP. Python (infant_mortality.deis_files, reached via
    the DuckDB function imr_deis_inspect that its dbt-duckdb plugin registers) unpacks ZIPs into
    var('deis_cache_dir'), detects encoding and header and refuses non-DEIS files; DuckDB then
    reads each file with read_csv, every column as text under its canonical DEIS name, plus
    source_file and source_line (the line number in the file, counting the header line).
-#}
{% macro deis_read(kind, select_columns) -%}
    {%- if not execute -%}
        {#- Parsing only: the shape without touching any file. -#}
        select
            cast(null as varchar) as source_file,
            cast(null as bigint) as source_line,
            {%- for column in select_columns %}
            cast(null as varchar) as {{ column }}{{ "," if not loop.last }}
            {%- endfor %}
        where false
    {%- else -%}
        {%- for file in deis_inspect(kind) %}
        {{ "union all" if not loop.first }}
        select
            {{ deis_quote_literal(file.source_file) }} as source_file,
            row_number() over () + {{ 1 if file.header else 0 }} as source_line,
            {%- for column in select_columns %}
            {{ column }}{{ "," if not loop.last }}
            {%- endfor %}
        from read_csv(
            {{ deis_quote_literal(file.path) }},
            delim = ';',
            header = {{ "true" if file.header else "false" }},
            auto_detect = false,
            columns = { {%- for column in file.columns %}'{{ column }}': 'VARCHAR'{{ ", " if not loop.last }}{% endfor -%} },
            encoding = '{{ file.encoding }}',
            quote = '"',
            escape = '"'
        )
        {%- endfor %}
    {%- endif -%}
{%- endmacro %}


{#- The files to read, as inspected by Python; stops the build with the reason if they are not DEIS files. -#}
{% macro deis_inspect(kind) -%}
    {%- set path = var('deis_' ~ kind ~ '_path', '') -%}
    {%- if not path -%}
        {{ exceptions.raise_compiler_error(
            "vital_source is deis_microdata but var 'deis_" ~ kind ~ "_path' is not set: "
            ~ "pass a file, folder, glob or published ZIP, e.g. --vars '{deis_" ~ kind ~ "_path: ...}'") }}
    {%- endif -%}
    {%- set registered = run_query(
        "select count(*) from duckdb_functions() where function_name = 'imr_deis_inspect'").columns[0].values()[0] -%}
    {%- if registered == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Reading DEIS microdata needs the DuckDB function imr_deis_inspect: add "
            ~ "'- module: infant_mortality.deis_files' under plugins: in the dbt profile") }}
    {%- endif -%}
    {%- set call -%}
        select imr_deis_inspect(
            {{ deis_quote_literal(path) }}, '{{ kind }}',
            {{ deis_quote_literal(var('deis_encoding', 'auto')) }},
            {{ deis_quote_literal(var('deis_cache_dir', 'target/deis_cache')) }})
    {%- endset -%}
    {%- set answer = fromjson(run_query(call).columns[0].values()[0]) -%}
    {%- if answer.error -%}
        {{ exceptions.raise_compiler_error(answer.error) }}
    {%- endif -%}
    {{ return(answer.files) }}
{%- endmacro %}


{% macro deis_quote_literal(text) -%}
    '{{ text | string | replace("'", "''") }}'
{%- endmacro %}
