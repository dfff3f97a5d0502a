-- UN IGME 2020 round for Chile, one row per line of the file, typed strictly: the SDG series
-- code becomes the warehouse's indicator code and a measure (a rate per 1000 live births or a
-- number of deaths). A series, year or value that does not parse stops the build naming the
-- file and line (a broken copy of reference data, not a gap to audit).
with source as (
    select * from {{ source('un_igme', 'estimates_2020_round') }}
),

numbered as (
    {{ numbered_csv_rows('source') }}
),

series as (
    select
        *,
        case trim(indicator)
            when 'sh_dyn_imrt' then 'imr' when 'sh_dyn_imrtn' then 'imr'
            when 'sh_dyn_nmrt' then 'nmr' when 'sh_dyn_nmrtn' then 'nmr'
            when 'sh_dyn_mort' then 'u5mr' when 'sh_dyn_mortn' then 'u5mr'
        end as indicator_code,
        case trim(units) when 'per_1000_live_births' then 'rate_per_1000' when 'number' then 'deaths' end as measure
    from numbered
)

select
    case when indicator_code is not null and measure is not null then indicator_code
        else error('Unknown series in ' || source_file || ' line ' || cast(source_line as varchar)
            || ': indicator = ' || coalesce(indicator, '(blank)') || ', units = ' || coalesce(units, '(blank)'))
    end as indicator,
    measure,
    trim(sex) as sex,
    cast({{ number_or_stop('year', 'year', 'source_file', 'source_line', whole=true) }} as integer) as year,
    {{ number_or_stop('value', 'value', 'source_file', 'source_line') }} as value,
    source_file,
    cast(source_line as bigint) as source_line
from series
