-- One row per data line of the DEIS deaths-by-age-group file, with its file and exact line
-- number, parsed strictly (macros/raw_text_files.sql): a malformed value is null and
-- `parse_problem` says which. The integer commune code lost its leading zero for regions 01-09:
-- 4 digits are padded back to the 5-character CUT code; any other length is malformed, never cut.
-- A key (commune, year, sex, age group) read twice stops the build here, naming both lines.
{% set header = 'CODIGO_COMUNA_RESIDENCIA,Year,Gender,Death_count_all_cause,Mean_age,Age group' %}
{% set key = [('commune_code', 'commune'), ('year', 'year'), ('sex', 'sex'), ('age_group', 'age_group')] %}
with lines as (
    {{ raw_text_lines(source('deis_aggregates', 'deaths_by_age_group'), header) }}
),

parsed as (
    select
        source_file,
        source_line,
        line,
        len(fields) as field_count,
        is_unterminated_last_line,
        {{ commune_code('fields[1]') }} as commune_code,
        {{ whole_number('fields[2]', '4') }} as year_number,
        {{ year_in_range('fields[2]') }} as year,
        coalesce({{ year_outside_window('fields[2]') }}, false) as is_year_outside_window,
        case when trim(fields[3]) in ('Hombre', 'Mujer') then trim(fields[3]) end as sex,
        {{ whole_number('fields[4]') }} as deaths,
        case when regexp_full_match(trim(fields[5]), '[0-9]{1,3}([.][0-9]+)?')
            then cast(trim(fields[5]) as double) end as mean_age_years,
        case when trim(fields[6]) in ('1+', '18+', '75+') then trim(fields[6]) end as age_group
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
            when commune_code is null then 'commune_code_malformed'
            when year_number is null then 'year_not_whole_number'
            when year is null then 'year_out_of_range'
            when sex is null then 'sex_unknown'
            when deaths is null then 'count_not_whole_number'
            when mean_age_years is null then 'mean_age_not_a_number'
            when age_group is null then 'age_group_unknown'
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
    commune_code,
    year,
    sex,
    age_group,
    -- A count on a line with any problem is not used (the last line of a cut file may be cut).
    case when parse_problem is null then deaths end as deaths,
    mean_age_years,
    parse_problem,
    line as raw_line
from keyed
where (
    {{ duplicate_key_stop(key) }}) is null
    and ({{ implausible_count_stop('deaths', 'Death_count_all_cause') }}) is null
