-- One row per data line of the bundled births by commune and year 2001-2016 (DEIS per-year
-- births bases as aggregated by DESUC), with its file and exact line number, parsed strictly
-- (macros/raw_text_files.sql): a malformed value is null and `parse_problem` says which. The
-- source holds the codes in force in each year; they go through the project's crosswalk
-- (commune_crosswalk_join), and the CUT 2018 code the derivation wrote beside them is kept so
-- that a test can hold the two mappings equal. A current commune read twice in one year (two
-- old codes of one commune, or a repeated line) stops the build here, naming both lines: its
-- births would otherwise be summed.
{% set header = 'anio,codigo_comuna,nombre_comuna,codigo_comuna_fuente,nacimientos,'
    ~ 'nac_madre_14_o_menos,nac_madre_15_16,nac_madre_17_19,nac_madre_20_o_mas_o_sin_dato' %}
{% set key = [('year', 'year'), ('commune_code', 'commune')] %}
with lines as (
    {{ raw_text_lines(source('deis_aggregates', 'births_by_commune_year'), header) }}
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
        {{ year_outside_window('fields[1]') }} as is_outside_window,
        {{ commune_code('fields[2]') }} as commune_code_derived,
        trim(fields[3]) as commune_name,
        {{ commune_code('fields[4]') }} as commune_code_as_read,
        {{ whole_number('fields[5]') }} as live_births,
        {{ whole_number('fields[6]') }} + {{ whole_number('fields[7]') }}
            + {{ whole_number('fields[8]') }} + {{ whole_number('fields[9]') }} as live_births_by_mother_age
    from lines
),

mapped as (
    select
        parsed.*,
        coalesce(crosswalk.new_code, parsed.commune_code_as_read) as commune_code,
        crosswalk.mapping as commune_code_mapping
    from parsed
    {{ commune_crosswalk_join('crosswalk', 'parsed.commune_code_as_read', 'parsed.year') }}
),

checked as (
    select
        *,
        case
            when trim(line) = '' then 'blank_line'
            when field_count <> 9 then 'wrong_field_count'
            when year_number is null then 'year_not_whole_number'
            when is_outside_window then null
            when year is null then 'year_out_of_range'
            when commune_code_as_read is null then 'commune_code_malformed'
            when commune_code_mapping = 'unsourced' then 'commune_code_unmapped'
            when commune_code not in (select codigo_comuna from {{ ref('communes_chile') }}) then 'commune_unknown'
            when live_births is null then 'count_not_whole_number'
            when live_births_by_mother_age is null or live_births_by_mother_age <> live_births
                then 'mother_age_groups_do_not_add_up'
            when is_unterminated_last_line then 'last_line_unterminated'
        end as parse_problem
    from mapped
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
    commune_code_as_read,
    commune_code_mapping,
    commune_code_derived,
    commune_name,
    -- A count on a line with any problem is not used (the last line of a cut file may be cut).
    case when parse_problem is null then live_births end as live_births,
    parse_problem,
    line as raw_line
from keyed
-- A line of a real year outside input_year_min..input_year_max is out of the build's window, and
-- a blank line holds nothing (both keep their place in the numbering).
where not coalesce(is_outside_window, false)
    and trim(line) <> ''
    and (
    {{ duplicate_key_stop(key) }}) is null
    and ({{ implausible_count_stop('live_births', 'nacimientos') }}) is null
    -- Every line is read or the build stops naming it (issue 41 part 8: a malformed line used to
    -- stop only through the data test every_line_is_read, "Got 1 result", naming no line).
    and (case when parse_problem is not null and parse_problem <> 'blank_line'
        then error(source_file || ' line ' || cast(source_line as varchar) || ': ' || parse_problem
            || ' (' || {{ text_excerpt('line') }} || '); write the line as ' || {{ sql_string(header) }})
    end) is null
