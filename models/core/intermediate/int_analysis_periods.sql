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

{# Checked by vars_spec: two whole years, start <= end (or null: no custom period). #}
{% set custom = setting('custom_period') %}
custom_period as (
    {% if custom %}
    select {{ custom['start'] }} as period_start, {{ custom['end'] }} as period_end, 'custom' as period_kind
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
