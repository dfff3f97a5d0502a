{#- Reading the bundled aggregate files (INE, DEIS aggregates) strictly (issue 18).

    The files are read as text, one row per physical line with its exact line number (header =
    line 1; blank lines count), so every problem names its file and line. Fields are split on
    commas: these files have no quoting. Nothing is cast unless it is a whole number. -#}

{#- The lines of a text file read by `read_text` (the source's external_location): file name,
    line number, the line without its carriage return / byte-order mark, its fields, and whether
    it is a last line with no newline after it (a cut file: its last value may be truncated).
    The header (line 1) must be exactly `header`, or the build stops naming the file. -#}
{% macro raw_text_lines(relation, header) -%}
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

    -- One row per file; a header that differs stops the build naming the file. Joined to every
    -- line, so that the check runs whatever a reader filters on.
    header_check as (
        select
            source_file,
            case when line <> {{ sql_string(header) }}
                then error('Unexpected header in ' || source_file || ' line 1: expected '
                    || {{ sql_string(header) }} || ', got ' || line)
            end as header_problem
        from numbered
        where source_line = 1
    )

    select
        numbered.source_file,
        numbered.source_line,
        numbered.line,
        string_split(numbered.line, ',') as fields,
        numbered.source_line = numbered.line_count and not numbered.ends_with_newline as is_unterminated_last_line
    from numbered
    inner join header_check on numbered.source_file = header_check.source_file
    -- Line 1 is the header; the empty string after the final newline is not a line.
    where numbered.source_line > 1
        and not (numbered.source_line = numbered.line_count and numbered.ends_with_newline)
        and header_check.header_problem is null
{%- endmacro %}

{#- A whole number written with digits only (after trimming), else null: `4.503`, `4503.7`,
    `1e3`, `0x10`, `-1` and blanks are not numbers here (DuckDB's cast would accept several). -#}
{% macro whole_number(text, digits='1,18') -%}
    case when regexp_full_match(trim({{ text }}), '[0-9]{% raw %}{{% endraw %}{{ digits }}{% raw %}}{% endraw %}')
        then cast(trim({{ text }}) as bigint) end
{%- endmacro %}

{#- A commune code of 4 or 5 digits (4 when the leading zero of regions 01-09 was lost), padded
    to the 5-character CUT code; anything else (6 digits, decimals, letters) is null: never cut. -#}
{% macro commune_code(text) -%}
    case when regexp_full_match(trim({{ text }}), '[0-9]{4,5}') then lpad(trim({{ text }}), 5, '0') end
{%- endmacro %}

{#- A year as a whole number inside the declared range (vars input_year_min, input_year_max;
    an empty input_year_max is the current year), else null: such a year is assigned nowhere. -#}
{% macro year_in_range(text) -%}
    case when {{ whole_number(text, '4') }} between {{ input_year_min() }} and {{ input_year_max() }}
        then cast({{ whole_number(text, '4') }} as integer) end
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
            || ': {{ field }} = ' || coalesce({{ text }}, '(blank)'))
    end
{%- endmacro %}

{#- The rows of a file read by read_csv (with filename = true), with the file's name and each
    row's line number: DuckDB keeps file order (preserve_insertion_order); + 1 for the header. -#}
{% macro numbered_csv_rows(relation) -%}
    select *, regexp_extract(filename, '[^/\\]+$') as source_file, row_number() over () + 1 as source_line
    from {{ relation }}
{%- endmacro %}
