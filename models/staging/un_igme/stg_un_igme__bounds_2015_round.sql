-- UN IGME 2015 round for Chile with its 90% uncertainty bounds, one row per line of the file,
-- typed strictly (an unknown indicator or bound, or a value that does not parse, stops the
-- build naming the file and line).
with source as (
    select * from {{ source('un_igme', 'bounds_2015_round') }}
),

numbered as (
    {{ numbered_csv_rows('source') }}
),

series as (
    select
        *,
        case trim(indicator)
            when 'IMR' then 'imr' when 'Infant.Deaths' then 'imr'
            when 'NMR' then 'nmr' when 'Neonatal.Deaths' then 'nmr'
            when 'U5MR' then 'u5mr'
        end as indicator_code,
        case when trim(indicator) like '%.Deaths' then 'deaths' else 'rate_per_1000' end as measure,
        case trim(bound) when 'Lower' then 'lower_90' when 'Median' then 'median' when 'Upper' then 'upper_90' end
            as bound_code
    from numbered
)

select
    case when indicator_code is not null and bound_code is not null then indicator_code
        else error('Unknown indicator or bound in ' || source_file || ' line ' || cast(source_line as varchar)
            || ': indicator = ' || coalesce(indicator, '(blank)') || ', bound = ' || coalesce(bound, '(blank)'))
    end as indicator,
    measure,
    bound_code as bound,
    cast({{ number_or_stop('year', 'year', 'source_file', 'source_line', whole=true) }} as integer) as year,
    {{ number_or_stop('value', 'value', 'source_file', 'source_line') }} as value,
    source_file,
    cast(source_line as bigint) as source_line
from series
