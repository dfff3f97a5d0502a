-- UN IGME 2015 round for Chile with its 90% uncertainty bounds, one row per data line of the
-- file, read line by line (macros/raw_text_files.sql) so that every message names the real line.
-- A header, field count, indicator, bound or value that does not parse, a key read twice, or
-- bounds out of order (lower > median or median > upper for one indicator and year) stops the
-- build naming the file, the line(s) and the fix.
{% set header = 'indicator,bound,year,value' %}
{% set key = [('indicator', 'indicator'), ('measure', 'measure'), ('bound', 'bound'), ('year', 'year')] %}
with lines as (
    {{ reference_csv_lines(source('un_igme', 'bounds_2015_round'), header) }}
),

series as (
    select
        source_file,
        source_line,
        fields[1] as indicator_text,
        fields[2] as bound_text,
        fields[3] as year_text,
        fields[4] as value_text,
        case fields[1]
            when 'IMR' then 'imr' when 'Infant.Deaths' then 'imr'
            when 'NMR' then 'nmr' when 'Neonatal.Deaths' then 'nmr'
            when 'U5MR' then 'u5mr'
        end as indicator_code,
        case when fields[1] like '%.Deaths' then 'deaths' else 'rate_per_1000' end as measure,
        case fields[2] when 'Lower' then 'lower_90' when 'Median' then 'median' when 'Upper' then 'upper_90' end
            as bound_code
    from lines
),

typed as (
    select
        case when indicator_code is not null and bound_code is not null then indicator_code
            else error('Unknown indicator or bound in ' || source_file || ' line ' || cast(source_line as varchar)
                || ': indicator = ' || {{ text_excerpt("coalesce(nullif(indicator_text, ''), '(blank)')") }}
                || ', bound = ' || {{ text_excerpt("coalesce(nullif(bound_text, ''), '(blank)')") }}
                || ' (expected indicator IMR, NMR, U5MR, Infant.Deaths or Neonatal.Deaths, bound Lower, Median or Upper)')
        end as indicator,
        measure,
        bound_code as bound,
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
),

-- Per indicator, measure and year: the three bounds and their lines, for the order check.
ordered as (
    select
        *,
        max(case when bound = 'lower_90' then value end) over estimate as lower_value,
        max(case when bound = 'median' then value end) over estimate as median_value,
        max(case when bound = 'upper_90' then value end) over estimate as upper_value,
        max(case when bound = 'lower_90' then source_line end) over estimate as lower_line,
        max(case when bound = 'median' then source_line end) over estimate as median_line,
        max(case when bound = 'upper_90' then source_line end) over estimate as upper_line
    from keyed
    window estimate as (partition by indicator, measure, year)
)

select indicator, measure, bound, year, value, source_file, source_line
from ordered
where ({{ duplicate_key_stop(key) }}) is null
    and (case when lower_value > median_value or median_value > upper_value or lower_value > upper_value
        then error('Bounds out of order in ' || source_file || ' lines '
            || concat_ws(', ', cast(lower_line as varchar), cast(median_line as varchar), cast(upper_line as varchar))
            || ' (' || indicator || ' ' || measure || ' ' || cast(year as varchar) || '): Lower = '
            || coalesce(cast(lower_value as varchar), '(none)')
            || ', Median = ' || coalesce(cast(median_value as varchar), '(none)')
            || ', Upper = ' || coalesce(cast(upper_value as varchar), '(none)')
            || '; the bounds must satisfy Lower <= Median <= Upper: check whether the Lower and Upper values were swapped')
    end) is null
