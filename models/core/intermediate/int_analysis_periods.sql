-- The periods every comparison and trend is computed over: the full window of the data, each
-- consecutive 5-year block from its first year (a trailing partial block is left out), and an
-- optional custom period from the dbt var `custom_period: {start: YYYY, end: YYYY}`.
with data_years as (
    select distinct year from {{ ref('int_commune_year_counts') }}
),

years as (
    select min(year) as first_year, max(year) as last_year from data_years
),

full_window as (
    select first_year as period_start, last_year as period_end, 'full_window' as period_kind
    from years
),

five_year_blocks as (
    select
        data_years.year as period_start,
        data_years.year + 4 as period_end,
        'five_year_block' as period_kind
    from data_years
    cross join years
    where mod(data_years.year - years.first_year, 5) = 0
        and data_years.year + 4 <= years.last_year
),

{# Checked by vars_spec: two whole years, start <= end (or null: no custom period). A custom
   period reaching outside the years of the data stops the build here (issue 41): its rates would
   pool only the years inside under the label of the years asked for (2008-2012 with data from
   2010 was published as 2008-2012 with 3 years). Stopping, rather than restricting it with a
   note, keeps every period label equal to the years it pools; the message gives the period that
   fits. #}
{% set custom = setting('custom_period') %}
custom_period as (
    {% if custom %}
    select
        case when {{ custom['start'] }} < first_year or {{ custom['end'] }} > last_year
            then error('dbt var custom_period {start: {{ custom['start'] }}, end: {{ custom['end'] }}} reaches outside the years of the data ('
                || cast(first_year as varchar) || '-' || cast(last_year as varchar) || '; vars scope_year_start, scope_year_end, input_year_min, input_year_max): '
                || case when {{ custom['end'] }} < first_year or {{ custom['start'] }} > last_year
                    then 'it holds none of them. '
                    else 'its rates would pool only ' || cast(least({{ custom['end'] }}, last_year) - greatest({{ custom['start'] }}, first_year) + 1 as varchar)
                        || ' of its {{ custom['end'] - custom['start'] + 1 }} years under the label {{ custom['start'] }}-{{ custom['end'] }}. Set it to '
                        || '{start: ' || cast(greatest({{ custom['start'] }}, first_year) as varchar) || ', end: '
                        || cast(least({{ custom['end'] }}, last_year) as varchar) || '} for the years the data has, or '
                end
                || 'set it inside ' || cast(first_year as varchar) || '-' || cast(last_year as varchar) || ' (null: no custom period)')
            else {{ custom['start'] }}
        end as period_start,
        {{ custom['end'] }} as period_end,
        'custom' as period_kind
    from years
    {% else %}
    select cast(null as integer) as period_start, cast(null as integer) as period_end, 'custom' as period_kind
    where false
    {% endif %}
),

all_periods as (
    select * from full_window
    union all
    select * from five_year_blocks
    union all
    select * from custom_period
)

-- A period listed twice (five years of data: block = full window) is kept once, as the
-- full window ('full_window' sorts last).
select
    period_start,
    period_end,
    cast(period_start as varchar) || '-' || cast(period_end as varchar) as period_label,
    max(period_kind) as period_kind
from all_periods
group by period_start, period_end
