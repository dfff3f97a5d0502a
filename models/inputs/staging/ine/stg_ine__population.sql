-- One row per data line of the INE population file (estimates and projections by commune and
-- year), with its file and exact line number, parsed strictly like the vital statistics
-- (macros/raw_text_files.sql). Only the population aged 0 is used: the yardstick of the births
-- plausibility check (int_commune_year_counts). Years are whole numbers of 4 digits but not held
-- to input_year_min..input_year_max: the file projects to 2035, and only the years that have
-- counts are ever joined. A key (year, commune) read twice stops the build naming both lines.
{% set header = 'codigo_comuna,nombre_comuna,anio,poblacion_total,poblacion_edad_0,mujeres_15_49' %}
{% set key = [('year', 'year'), ('commune_code', 'commune')] %}
with lines as (
    {{ raw_text_lines(source('ine', 'population'), header) }}
),

parsed as (
    select
        source_file,
        source_line,
        line,
        len(fields) as field_count,
        is_unterminated_last_line,
        {{ commune_code('fields[1]') }} as commune_code,
        trim(fields[2]) as commune_name,
        {{ whole_number('fields[3]', '4') }} as year,
        {{ whole_number('fields[5]') }} as age_0_population
    from lines
),

checked as (
    select
        *,
        case
            when trim(line) = '' then 'blank_line'
            when field_count <> 6 then 'wrong_field_count'
            when commune_code is null then 'commune_code_malformed'
            when year is null then 'year_not_whole_number'
            when age_0_population is null then 'count_not_whole_number'
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
    cast(year as integer) as year,
    commune_code,
    commune_name,
    case when parse_problem is null then age_0_population end as age_0_population,
    parse_problem,
    line as raw_line
from keyed
where (
    {{ duplicate_key_stop(key) }}) is null
    and ({{ implausible_count_stop('age_0_population', 'population aged 0') }}) is null
