-- MINSAL's official crude infant mortality rates (DRDSS indicator matrix 2023), one row per line
-- of the file, typed strictly and matched to the warehouse's codes: the country is `CL`, a
-- region its 2-digit code, a commune its 5-digit CUT code, each checked against the commune
-- reference (stg_reference__communes). An unknown code, a commune whose two code columns
-- disagree, a rate that is neither a number, blank nor MINSAL's `--` (no value published), or a
-- duplicated unit stops the build naming the file and line: a broken copy of reference data,
-- not a gap to audit.
-- The file is read line by line (macros/raw_text_files.sql, as the INE and UN IGME files are), so
-- every message names the real line: a header that differs or a line with more or fewer fields
-- stops there.
{% set header = ['codigo', 'unidad_territorial', 'tmi_total_2017_2019', 'tmi_hombres_2017_2019',
                 'tmi_mujeres_2017_2019', 'tmi_total_2020', 'tmi_hombres_2020', 'tmi_mujeres_2020',
                 'tmi_total_2011_2020', 'tmi_hombres_2011_2020', 'tmi_mujeres_2011_2020', 'codigo_comuna'] | join(',') %}
with lines as (
    {{ reference_csv_lines(source('minsal', 'drdss_2023_infant_mortality_rates'), header) }}
),

numbered as (
    select
        source_file,
        source_line,
        fields[1] as codigo,
        fields[2] as unidad_territorial,
        fields[3] as tmi_total_2017_2019,
        fields[4] as tmi_hombres_2017_2019,
        fields[5] as tmi_mujeres_2017_2019,
        fields[6] as tmi_total_2020,
        fields[7] as tmi_hombres_2020,
        fields[8] as tmi_mujeres_2020,
        fields[9] as tmi_total_2011_2020,
        fields[10] as tmi_hombres_2011_2020,
        fields[11] as tmi_mujeres_2011_2020,
        fields[12] as codigo_comuna
    from lines
),

regions as (
    select distinct region_code, region_name from {{ ref('stg_reference__communes') }}
),

communes as (
    select commune_code, commune_name, region_code from {{ ref('stg_reference__communes') }}
),

parsed as (
    select
        numbered.*,
        {{ whole_number('codigo', '1,5') }} as code_number,
        {{ commune_code('codigo_comuna') }} as commune_code_as_read,
        case
            when trim(unidad_territorial) = 'Chile - total' then 'total'
            when trim(unidad_territorial) = 'Chile - hombres' then 'male'
            when trim(unidad_territorial) = 'Chile - mujeres' then 'female'
        end as country_row_sex
    from numbered
),

classified as (
    select
        parsed.*,
        case
            when code_number = 0 and country_row_sex is not null and nullif(trim(codigo_comuna), '') is null then 'country'
            when code_number between 1 and 99 and nullif(trim(codigo_comuna), '') is null then 'region'
            when code_number >= 1000 and commune_code_as_read = lpad(cast(code_number as varchar), 5, '0') then 'commune'
        end as area_level
    from parsed
),

matched as (
    select
        classified.*,
        case area_level
            when 'country' then 'CL'
            when 'region' then regions.region_code
            when 'commune' then communes.commune_code
        end as area_code,
        coalesce(communes.region_code, regions.region_code) as region_code
    from classified
    left join regions
        on classified.area_level = 'region' and lpad(cast(classified.code_number as varchar), 2, '0') = regions.region_code
    left join communes
        on classified.area_level = 'commune' and classified.commune_code_as_read = communes.commune_code
),

keyed as (
    select
        coalesce(
            area_code,
            error('Unknown territorial unit in ' || source_file || ' line ' || cast(source_line as varchar)
                || ': codigo = ' || coalesce(codigo, '(blank)') || ', codigo_comuna = ' || coalesce(codigo_comuna, '(blank)')
                || ', unidad_territorial = ' || coalesce(unidad_territorial, '(blank)')
                || ' (expected 0 for Chile, a region code of the commune reference, or a commune code equal to codigo_comuna)')
        ) as area_code,
        area_level,
        coalesce(country_row_sex, 'total') as row_sex,
        *
        exclude (area_code, area_level)
    from matched
),

with_keys as (
    select *, {{ duplicate_key_columns([('area_level', 'area_level'), ('area_code', 'area_code'), ('row_sex', 'row_sex')]) }}
    from keyed
)

select
    area_level,
    {%- set unit_key = [('area_level', 'area_level'), ('area_code', 'area_code'), ('row_sex', 'row_sex')] %}
    coalesce({{ duplicate_key_stop(unit_key) }}, area_code) as area_code,
    trim(unidad_territorial) as area_name,
    region_code,
    row_sex,
    {%- for column in ['tmi_total_2017_2019', 'tmi_hombres_2017_2019', 'tmi_mujeres_2017_2019',
                       'tmi_total_2020', 'tmi_hombres_2020', 'tmi_mujeres_2020',
                       'tmi_total_2011_2020', 'tmi_hombres_2011_2020', 'tmi_mujeres_2011_2020'] %}
    case
        when nullif(trim({{ column }}), '') is null or trim({{ column }}) = '--' then cast(null as double)
        else {{ number_or_stop(column, column, 'source_file', 'source_line') }}
    end as {{ column | replace('tmi_total', 'imr') | replace('tmi_hombres', 'imr_male') | replace('tmi_mujeres', 'imr_female') }},
    {%- endfor %}
    source_file,
    cast(source_line as bigint) as source_line
from with_keys
