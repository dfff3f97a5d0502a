-- DEIS's corrected live births of the Región Metropolitana (SEREMI de Salud RM's copy), one row per
-- line, typed strictly and matched to the warehouse's codes: a commune by its name (accents and
-- case aside: the file writes `Peñalolen`; `San José del Maipo` is San José de Maipo), the region
-- by its own line `Región Metropolitana`.
-- The file is reference data copied whole, so a broken line is a broken copy: a value that does not
-- parse, a unit that is not an RM commune, a unit-year read twice, or a birth rate that is not the
-- line's births / population x 1000 (the three were written together; one altered shows here)
-- stops the build naming the file and line. Whether the region's line equals the sum of its
-- communes is audited, not stopped on (int_audit__corrected_births): the warehouse sums communes.
{% set header = 'Año,Tasa Natalidad,Nacidos Vivos Corregidos,Población INE,Comuna' %}
{#- The file is the Región Metropolitana's: its names are matched against that region's communes only. -#}
{% set region_code = '13' %}
{% set region_line_name = 'Región Metropolitana' %}
{#- Names the file spells otherwise than the commune reference (beyond accents and case), with the code they name. -#}
{% set name_aliases = {'San José del Maipo': '13203'} %}
with lines as (
    {{ reference_csv_lines(source('seremi_rm', 'corrected_births'), header) }}
),

numbered as (
    select
        source_file,
        source_line,
        fields[1] as year_text,
        fields[2] as birth_rate_text,
        fields[3] as births_text,
        fields[4] as population_text,
        fields[5] as unit_name
    from lines
),

communes as (
    select commune_code, commune_name
    from {{ ref('stg_reference__communes') }}
    where region_code = '{{ region_code }}'
),

matched as (
    select
        numbered.*,
        case
            when numbered.unit_name = {{ sql_string(region_line_name) }} then 'region'
            when communes.commune_code is not null then 'commune'
        end as area_level,
        coalesce(communes.commune_code, case when numbered.unit_name = {{ sql_string(region_line_name) }}
            then '{{ region_code }}' end) as area_code
    from numbered
    left join communes
        on lower(strip_accents(numbered.unit_name)) = lower(strip_accents(communes.commune_name))
        {%- for alias, code in name_aliases.items() %}
        or (numbered.unit_name = {{ sql_string(alias) }} and communes.commune_code = '{{ code }}')
        {%- endfor %}
),

parsed as (
    select
        source_file,
        source_line,
        unit_name,
        coalesce(area_level, error('Unknown unit in ' || source_file || ' line ' || cast(source_line as varchar)
            || ': Comuna = ' || {{ text_excerpt("coalesce(nullif(unit_name, ''), '(blank)')") }}
            || ' (expected a commune of the Región Metropolitana as the commune reference names it, accents aside, or '
            || {{ sql_string("'" ~ region_line_name ~ "'") }} || ')')) as area_level,
        area_code,
        cast({{ number_or_stop('year_text', 'Año', 'source_file', 'source_line', whole=true) }} as integer) as year,
        {{ number_or_stop('births_text', 'Nacidos Vivos Corregidos', 'source_file', 'source_line', whole=true) }}
            as live_births_as_read,
        {{ number_or_stop('population_text', 'Población INE', 'source_file', 'source_line', whole=true) }} as population,
        birth_rate_text
    from matched
),

-- A blank birth rate is the file's way of saying the commune did not exist yet (Padre Hurtado
-- 1992-1994: 0 births, population 0); anywhere else it is a broken line.
checked as (
    select
        *,
        case
            when nullif(birth_rate_text, '') is null and live_births_as_read = 0 and population = 0 then cast(null as double)
            else {{ number_or_stop('birth_rate_text', 'Tasa Natalidad', 'source_file', 'source_line') }}
        end as birth_rate_per_1000
    from parsed
),

with_keys as (
    select *, {{ duplicate_key_columns([('area_code', 'unit'), ('year', 'year')]) }}
    from checked
)

select
    area_level,
    {%- set unit_year = [('area_code', 'unit'), ('year', 'year')] %}
    coalesce({{ duplicate_key_stop(unit_year) }}, area_code) as area_code,
    '{{ region_code }}' as region_code,
    unit_name as area_name,
    year,
    -- No figure where the unit had no population (did not exist): not a corrected count of 0.
    case when population > 0 then live_births_as_read end as corrected_live_births,
    population,
    birth_rate_per_1000,
    source_file,
    cast(source_line as bigint) as source_line
from with_keys
where ({{ implausible_count_stop('live_births_as_read', 'Nacidos Vivos Corregidos') }}) is null
    and (case when population > 0
            and abs(birth_rate_per_1000 - live_births_as_read * 1000.0 / population) > 1e-9 * greatest(birth_rate_per_1000, 1)
        then error(source_file || ' line ' || cast(source_line as varchar) || ': Tasa Natalidad '
            || birth_rate_text || ' is not Nacidos Vivos Corregidos / Población INE x 1000 ('
            || cast(live_births_as_read * 1000.0 / population as varchar)
            || '): one of the three values was altered; restore the line from the source (data/README.md)')
    end) is null
