{#-
    Read the DEIS microdata files named by var('deis_<kind>_path') (kind: deaths or births): a
    file, a folder, a glob or a published ZIP. Python (infant_mortality.deis_files, reached via
    the DuckDB function imr_deis_inspect that its dbt-duckdb plugin registers) unpacks ZIPs into
    var('deis_cache_dir'), detects encoding and header and refuses non-DEIS files; DuckDB then
    reads the files with read_csv, every column as text under its canonical DEIS name, plus
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
        {#- Files of one layout (header, encoding, columns) are read by one read_csv over the
            list, in parallel; one file at a time was 30% slower on 30 yearly births files. -#}
        {%- set groups = {} -%}
        {%- for file in deis_inspect(kind) -%}
            {%- set key = (file.header, file.encoding, file.columns | join(',')) | join('|') -%}
            {%- do groups.setdefault(key, []).append(file) -%}
        {%- endfor -%}
        {%- for files in groups.values() %}
        {{ "union all" if not loop.first }}
        {{ deis_read_group(files, select_columns) }}
        {%- endfor %}
    {%- endif -%}
{%- endmacro %}


{#- The files to read, as inspected by Python; stops the build with the reason if they are not DEIS files. -#}
{% macro deis_inspect(kind) -%}
    {%- set path = checked_var('deis_' ~ kind ~ '_path') -%}
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
            {{ deis_quote_literal(checked_var('deis_encoding')) }},
            {{ deis_quote_literal(checked_var('deis_cache_dir')) }})
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


{#- One read_csv over files of one layout. source_line is the record's line in its own file:
    DuckDB keeps each file's rows together and in order (insertion order is preserved), so a
    row's position in the whole read minus its file's first position gives the line. -#}
{% macro deis_read_group(files, select_columns) -%}
    {%- set header_lines = 1 if files[0].header else 0 -%}
    {%- if files | length == 1 %}
    {#- One file (the deaths file): number its rows directly; finding each file's first row
        would cost a join over millions of rows for nothing. -#}
    select
        {{ deis_quote_literal(files[0].source_file) }} as source_file,
        row_number() over () + {{ header_lines }} as source_line,
        {{ select_columns | join(', ') }}
    from {{ deis_read_csv(files, with_filename=false) }}
    {%- else %}
    select * from (
        with numbered as (
            select filename, row_number() over () as row_in_read, {{ select_columns | join(', ') }}
            from {{ deis_read_csv(files, with_filename=true) }}
        ),

        file_starts as (
            select filename, min(row_in_read) as first_row from numbered group by filename
        ),

        display_names as (
            {%- for file in files %}
            select {{ deis_quote_literal(file.path) }} as filename, {{ deis_quote_literal(file.source_file) }} as source_file
            {{ "union all" if not loop.last }}
            {%- endfor %}
        )

        select
            display_names.source_file,
            numbered.row_in_read - file_starts.first_row + 1 + {{ header_lines }} as source_line,
            {%- for column in select_columns %}
            numbered.{{ column }}{{ "," if not loop.last }}
            {%- endfor %}
        from numbered
        inner join file_starts on numbered.filename = file_starts.filename
        inner join display_names on numbered.filename = display_names.filename
    )
    {%- endif %}
{%- endmacro %}


{#- read_csv of files sharing one layout: every column as text under its canonical DEIS name. -#}
{% macro deis_read_csv(files, with_filename) -%}
    {%- set first = files[0] -%}
    read_csv(
        [{%- for file in files %}{{ deis_quote_literal(file.path) }}{{ ", " if not loop.last }}{% endfor -%}],
        delim = ';',
        header = {{ "true" if first.header else "false" }},
        auto_detect = false,
        columns = { {%- for column in first.columns %}'{{ column }}': 'VARCHAR'{{ ", " if not loop.last }}{% endfor -%} },
        encoding = '{{ first.encoding }}',
        quote = '"',
        escape = '"',
        filename = {{ "true" if with_filename else "false" }}
    )
{%- endmacro %}
