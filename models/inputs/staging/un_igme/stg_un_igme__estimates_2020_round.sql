-- UN IGME 2020 round for Chile, one row per data line of the file, typed strictly: the SDG series
-- code becomes the warehouse's indicator code and a measure (a rate per 1000 live births or a
-- number of deaths). The file is read line by line (macros/raw_text_files.sql, as the INE file
-- is), so every message names the real line (blank lines count, and are skipped). A header,
-- a line with more or fewer fields, a series, year or value that does not parse, or a key read
-- twice stops the build naming the file, the line and the fix (a broken copy of reference data,
-- not a gap to audit).
{% set header = 'indicator,age,sex,units,year,value' %}
{% set key = [('indicator', 'indicator'), ('measure', 'measure'), ('sex', 'sex'), ('year', 'year')] %}
with lines as (
    {{ reference_csv_lines(source('un_igme', 'estimates_2020_round'), header) }}
),

series as (
    select
        source_file,
        source_line,
        fields[1] as indicator_text,
        fields[3] as sex,
        fields[4] as units,
        fields[5] as year_text,
        fields[6] as value_text,
        case fields[1]
            when 'sh_dyn_imrt' then 'imr' when 'sh_dyn_imrtn' then 'imr'
            when 'sh_dyn_nmrt' then 'nmr' when 'sh_dyn_nmrtn' then 'nmr'
            when 'sh_dyn_mort' then 'u5mr' when 'sh_dyn_mortn' then 'u5mr'
        end as indicator_code,
        case fields[4] when 'per_1000_live_births' then 'rate_per_1000' when 'number' then 'deaths' end as measure
    from lines
),

typed as (
    select
        case when indicator_code is not null and measure is not null then indicator_code
            else error('Unknown series in ' || source_file || ' line ' || cast(source_line as varchar)
                || ': indicator = ' || {{ text_excerpt("coalesce(nullif(indicator_text, ''), '(blank)')") }}
                || ', units = ' || {{ text_excerpt("coalesce(nullif(units, ''), '(blank)')") }}
                || ' (expected an SDG series sh_dyn_imrt/imrtn, nmrt/nmrtn or mort/mortn,'
                || ' with units per_1000_live_births or number)')
        end as indicator,
        measure,
        case when sex in ('bothsex', 'female', 'male') then sex
            else error('Unknown sex in ' || source_file || ' line ' || cast(source_line as varchar)
                || ': sex = ' || {{ text_excerpt("coalesce(nullif(sex, ''), '(blank)')") }}
                || ' (expected bothsex, female or male)')
        end as sex,
        cast({{ number_or_stop('year_text', 'year', 'source_file', 'source_line', whole=true) }} as integer) as year,
        {{ number_or_stop('value_text', 'value', 'source_file', 'source_line') }} as value,
        source_file,
        cast(source_line as bigint) as source_line
    from series
),

keyed as (
    select
        *,
        {{ duplicate_key_columns(key) }}
    from typed
)

select indicator, measure, sex, year, value, source_file, source_line
from keyed
where ({{ duplicate_key_stop(key) }}) is null
