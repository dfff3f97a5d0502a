{#- Reading the bundled aggregate files (INE, DEIS aggregates) strictly (issue 18).

    The files are read as text, one row per physical line with its exact line number (header =
    line 1; blank lines count), so every problem names its file and line. Fields are split on
    commas: these files have no quoting. Nothing is cast unless it is a whole number. -#}

{#- The lines of a text file read by `imr_read_text` (the source's external_location: the path
    taken literally, bytes that are not UTF-8 stopped naming file and line): file name, line
    number, the line without its carriage return / byte-order mark, its fields, and whether it is
    a last line with no newline after it (a cut file: its last value may be truncated).
    The header (line 1) must be exactly `header` (none: the file has no header), and the file
    must hold at least one data line, or the build stops naming the file. -#}
{% macro raw_text_lines(relation, header=none) -%}
    {%- set first_data_line = 1 if header is none else 2 -%}
    with numbered as (
        select
            filename as source_file,
            cast(generate_subscripts(lines, 1) as bigint) as source_line,
            rtrim(unnest(lines), chr(13)) as line,
            len(lines) as line_count,
            ends_with_newline
        from (
            select
                filename,
                string_split(ltrim(content, chr(65279)), chr(10)) as lines,
                ends_with(content, chr(10)) as ends_with_newline
            from {{ relation }}
        ) as files
    ),

    -- The empty string after the final newline is not a line.
    real_lines as (
        select * from numbered
        where not (source_line = line_count and ends_with_newline)
    ),

    -- One row per file; a header that differs, or no data line at all, stops the build naming
    -- the file. Joined to every line, so that the check runs whatever a reader filters on.
    file_check as (
        select
            source_file,
            case
                {%- if header is not none %}
                when coalesce(max(case when source_line = 1 then line end), '') <> {{ sql_string(header) }}
                    then error('Unexpected header in ' || source_file || ' line 1: expected '
                        || {{ sql_string(header) }} || ', got '
                        || coalesce({{ text_excerpt('max(case when source_line = 1 then line end)') }}, 'nothing')
                        || ' (write line 1 as the expected header, with the columns in that order)')
                {%- endif %}
                when count(case when source_line >= {{ first_data_line }} and trim(line) <> '' then 1 end) = 0
                    then error(source_file || ' holds no data lines ('
                        || {{ "'only its header'" if header is not none else "'it is empty'" }}
                        || '): every count it should give would be missing. Put the data in the file, or point raw_data_dir at a folder with complete files')
                {%- if header is not none %}
                -- Not one data line split like the header: the file's separators are off (a comma
                -- added or lost on every line), not a value here and there; auditing every line
                -- would publish nothing and say little.
                when count(case when source_line >= 2 and len(string_split(line, ',')) = {{ header.split(',') | length }} then 1 end) = 0
                    then error(source_file || ' line 2: ' || cast(len(string_split(max(case when source_line = 2 then line end), ',')) as varchar)
                        || ' comma-separated fields, and no data line has the header''s {{ header.split(',') | length }}'
                        || ' (a comma added or missing on every line, e.g. a trailing comma?): write each line as '
                        || {{ sql_string(header) }})
                {%- endif %}
            end as file_problem
        from real_lines
        group by source_file
    )

    select
        real_lines.source_file,
        real_lines.source_line,
        real_lines.line,
        string_split(real_lines.line, ',') as fields,
        real_lines.source_line = real_lines.line_count and not real_lines.ends_with_newline as is_unterminated_last_line
    from real_lines
    inner join file_check on real_lines.source_file = file_check.source_file
    where real_lines.source_line >= {{ first_data_line }}
        and file_check.file_problem is null
{%- endmacro %}

{#- A whole number written with digits only (after trimming), else null: `4.503`, `4503.7`,
    `1e3`, `0x10`, `-1` and blanks are not numbers here (DuckDB's cast would accept several). -#}
{% macro whole_number(text, digits='1,18') -%}
    case when regexp_full_match(trim({{ text }}), '[0-9]{% raw %}{{% endraw %}{{ digits }}{% raw %}}{% endraw %}')
        then cast(trim({{ text }}) as bigint) end
{%- endmacro %}

{#- Null, or a DuckDB error naming file and line when `count` is above var('max_plausible_count'):
    such a count is a typo (an 18-digit births count) that no later check should have to meet. -#}
{% macro implausible_count_stop(count, what) -%}
    case when {{ count }} > {{ int_var('max_plausible_count') }}
        then error(source_file || ' line ' || cast(source_line as varchar) || ': ' || {{ sql_string(what) }} || ' '
            || cast({{ count }} as varchar) || ' is beyond any plausible count (dbt var max_plausible_count = '
            || {{ sql_string(int_var('max_plausible_count')) }} || '): correct the value on that line')
    end
{%- endmacro %}

{#- A decimal number written with digits and at most one decimal point (`6.4`, `-0.5`, `12`),
    else null: `6,4`, `1e3`, `nan`, `inf` and blanks are not numbers here. -#}
{% macro decimal_number(text) -%}
    case when regexp_full_match(trim({{ text }}), '-?[0-9]{1,15}([.][0-9]{1,17})?')
        then cast(trim({{ text }}) as double) end
{%- endmacro %}

{#- A commune code of 4 or 5 digits (4 when the leading zero of regions 01-09 was lost), padded
    to the 5-character CUT code; anything else (6 digits, decimals, letters) is null: never cut. -#}
{% macro commune_code(text) -%}
    case when regexp_full_match(trim({{ text }}), '[0-9]{4,5}') then lpad(trim({{ text }}), 5, '0') end
{%- endmacro %}

{#- The same code, or the field as written (trimmed; null when blank) when it is not one, so
    that a problem record still names what it held (`11101.9`, `abc`): the readers that audit a
    bad code instead of refusing the line. The one commune-code parser of the warehouse. -#}
{% macro commune_code_or_text(text) -%}
    coalesce({{ commune_code(text) }}, nullif(trim({{ text }}), ''))
{%- endmacro %}

{#- A year as a whole number inside the declared range (vars input_year_min, input_year_max;
    an empty input_year_max is the current year), else null: such a year is assigned nowhere. -#}
{% macro year_in_range(text) -%}
    case when {{ whole_number(text, '4') }} between {{ input_year_min() }} and {{ input_year_max() }}
        then cast({{ whole_number(text, '4') }} as integer) end
{%- endmacro %}

{#- True when the text is a real year outside the declared window (vars input_year_min,
    input_year_max): a whole 4-digit number from 1900 to the current year that the window leaves
    out. Such a line belongs to a year outside the window: it is counted outside, never as a line
    that could belong to any year (issue 41: narrowing the window made every commune-year
    deis_row_unattributable). A year that no record can have (2109, 1016) stays
    year_out_of_range: a typo, which may belong to any year of its commune. -#}
{% macro year_outside_window(text) -%}
    ({{ whole_number(text, '4') }} between 1900 and extract(year from current_date)
        and {{ whole_number(text, '4') }} not between {{ input_year_min() }} and {{ input_year_max() }})
{%- endmacro %}

{% macro input_year_min() -%}
    {{ return(int_var('input_year_min')) }}
{%- endmacro %}

{% macro input_year_max() -%}
    {%- if var('input_year_max') is none or var('input_year_max') == '' -%}
        {{ return(modules.datetime.date.today().year) }}
    {%- endif -%}
    {{ return(int_var('input_year_max')) }}
{%- endmacro %}

{#- A number written with digits and at most one point (`7.4`, `1845`; with whole=true digits
    only), else the build stops naming the file, line and field: for reference files, where a
    value that does not parse means the copy is broken, not a gap to audit. -#}
{% macro number_or_stop(text, field, source_file, source_line, whole=false) -%}
    case when regexp_full_match(trim({{ text }}), '{{ "[0-9]+" if whole else "[0-9]+(\.[0-9]+)?" }}')
        then cast(trim({{ text }}) as {{ 'bigint' if whole else 'double' }})
        else error('Not a number in ' || {{ source_file }} || ' line ' || cast({{ source_line }} as varchar)
            || ': {{ field }} = ' || {{ text_excerpt("coalesce(nullif(trim(" ~ text ~ "), ''), '(blank)')") }}
            || '{{ " (write it with digits only)" if whole else " (write it with digits and at most one decimal point)" }}')
    end
{%- endmacro %}



{#- The duplicate-key stop of a staging model that reads a file line by line: `keys` is a list of
    (column, label) pairs. duplicate_key_columns() adds, per line, how many lines share its key
    and the first of them; duplicate_key_stop() is null, or a DuckDB error naming the file, the
    line, the first line with the same key and the key itself, so that a duplicated official row
    stops the build instead of being summed twice. A line whose key is incomplete (a parse
    problem) is not a duplicate here: its own parse_problem reports it. -#}
{% macro duplicate_key_columns(keys) -%}
    {%- set partition = keys | map('first') | join(', ') -%}
    count(*) over (partition by {{ partition }}) as key_rows,
    min(source_line) over (partition by {{ partition }}) as key_first_line
{%- endmacro %}

{% macro duplicate_key_stop(keys) -%}
    case when key_rows > 1 and source_line > key_first_line
        {%- for column, label in keys %} and {{ column }} is not null{% endfor %}
        then error('Duplicated row in ' || source_file || ' line ' || cast(source_line as varchar)
            || ': same key as line ' || cast(key_first_line as varchar) || ' ('
            {%- for column, label in keys %}
            || '{{ " " if not loop.first }}{{ label }}=' || cast({{ column }} as varchar)
            {%- endfor %}
            || '). Each key must appear once; remove the extra row.')
    end
{%- endmacro %}

{#- The data lines of a reference file (UN IGME) read by raw_text_lines: the header must be
    `header`, blank lines are skipped (they keep their place in the numbering, so a message names
    the real line), and a line not split like the header stops the build naming the file, the
    line, its start and the header to write: reference data is copied whole, a broken line is a
    broken copy, not a gap to audit. `fields` holds the trimmed fields. -#}
{% macro reference_csv_lines(relation, header) -%}
    {%- set width = header.split(',') | length -%}
    select
        source_file,
        source_line,
        line,
        list_transform(fields, lambda field: trim(field)) as fields
    from ({{ raw_text_lines(relation, header) }}) as lines
    where trim(line) <> ''
        and (case when len(fields) <> {{ width }}
            then error(source_file || ' line ' || cast(source_line as varchar) || ': '
                || cast(len(fields) as varchar) || ' comma-separated fields where the header has {{ width }} ('
                || {{ text_excerpt('line') }} || '); write the line as ' || {{ sql_string(header) }})
        end) is null
{%- endmacro %}

{#- A short quotation of a text for an error message: at most `length` characters, then how many
    more there were. A long input (a file whose line ends were not found is one 300 kB "line") is
    quoted, never dumped. -#}
{% macro text_excerpt(text, length=80) -%}
    case when length({{ text }}) > {{ length }}
        then '"' || left({{ text }}, {{ length }}) || '" ... (' || cast(length({{ text }}) - {{ length }} as varchar) || ' more characters)'
        else '"' || coalesce({{ text }}, '') || '"'
    end
{%- endmacro %}
