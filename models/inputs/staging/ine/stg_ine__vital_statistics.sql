-- One row per data line of the INE vital statistics file, with its file and exact line number.
-- Values are parsed strictly (macros/raw_text_files.sql): a value that is not what it should be
-- is null and `parse_problem` says which; nothing is cast from a malformed text, nothing dropped.
-- A key (year, commune, event, sex) read twice stops the build here, naming both lines: a
-- duplicated official row would otherwise be summed into a commune-year.
{% set header = 'anio,codigo_comuna,nombre_comuna,evento,sexo,cantidad' %}
{% set key = [('year', 'year'), ('commune_code', 'commune'), ('event_type', 'event'), ('sex', 'sex')] %}
with lines as (
    {{ raw_text_lines(source('ine', 'vital_statistics'), header) }}
),

parsed as (
    select
        source_file,
        source_line,
        line,
        len(fields) as field_count,
        is_unterminated_last_line,
        {{ whole_number('fields[1]', '4') }} as year_number,
        {{ year_in_range('fields[1]') }} as year,
        coalesce({{ year_outside_window('fields[1]') }}, false) as is_year_outside_window,
        {{ commune_code('fields[2]') }} as commune_code,
        trim(fields[3]) as commune_name,
        case trim(fields[4])
            when 'nacimiento' then 'live_birth'
            when 'defuncion' then 'death_all_ages'
        end as event_type,
        case when trim(fields[5]) = 'total' then 'total' end as sex,
        {{ whole_number('fields[6]') }} as event_count
    from lines
),

checked as (
    select
        *,
        case
            when trim(line) = '' then 'blank_line'
            when field_count <> 6 then 'wrong_field_count'
            -- A year the window leaves out: counted outside it, whatever else the line holds.
            when is_year_outside_window then 'year_outside_window'
            when year_number is null then 'year_not_whole_number'
            when year is null then 'year_out_of_range'
            when commune_code is null then 'commune_code_malformed'
            when event_type is null then 'event_unknown'
            when sex is null then 'sex_unknown'
            when event_count is null then 'count_not_whole_number'
            when is_unterminated_last_line then 'last_line_unterminated'
        end as parse_problem
    from parsed
),

keyed as (
    select
        *,
        {{ duplicate_key_columns(key) }}
    from checked
)

select
    source_file,
    source_line,
    year,
    commune_code,
    commune_name,
    event_type,
    sex,
    -- A count on a line with any problem is not used (the last line of a cut file may be cut).
    case when parse_problem is null then event_count end as event_count,
    parse_problem,
    line as raw_line
from keyed
where (
    {{ duplicate_key_stop(key) }}) is null
    and ({{ implausible_count_stop('event_count', 'count') }}) is null
