-- The segments of every joinpoint fit of fct_trends (NCI Joinpoint: the broken line, one row per
-- segment), unpacked from the JSON list int_trends carries beside the fit's AAPC.
{%- set segment_fields = [
    ('segment', 'INTEGER'), ('segment_start', 'INTEGER'), ('segment_end', 'INTEGER'),
    ('slope_log10', 'DOUBLE'), ('slope_se', 'DOUBLE'), ('apc', 'DOUBLE'), ('apc_lower', 'DOUBLE'),
    ('apc_upper', 'DOUBLE'), ('p_value', 'DOUBLE')] %}
{#- The JSON shape of one segment, as DuckDB's from_json wants it. -#}
{%- set fields = [] -%}
{%- for name, type in segment_fields %}{% do fields.append('"' ~ name ~ '": "' ~ type ~ '"') %}{% endfor -%}
{%- set segment_type = '[{' ~ fields | join(', ') ~ '}]' %}

with joinpoint_fits as (
    select * from {{ ref('int_trends') }}
    -- Only series that can get a class: a joinpoint drawn on a series too thin to measure, or
    -- whose fit is not valid, would look like a finding where the mart publishes none.
    where method = 'joinpoint' and segments is not null
        and trend not in ('insufficient_data', 'not_estimable')
),

segments as (
    select
        area_level, area_code, area_name, region_code, indicator, period_start, period_end,
        slope_log10 as aapc_slope_log10, apc as aapc, trend as series_trend, n_deaths as series_deaths,
        unnest(from_json(segments, {{ sql_string(segment_type) }})) as s
    from joinpoint_fits
)

select
    area_level,
    area_code,
    area_name,
    region_code,
    indicator,
    cast(period_start as bigint) as period_start,
    cast(period_end as bigint) as period_end,
    cast(s.segment as integer) as segment,
    cast(count(*) over (
        partition by area_level, area_code, indicator, period_start, period_end) as integer) as n_segments,
    cast(s.segment_start as bigint) as segment_start,
    cast(s.segment_end as bigint) as segment_end,
    s.slope_log10,
    s.slope_se,
    s.apc,
    s.apc_lower as apc_ci95_lower,
    s.apc_upper as apc_ci95_upper,
    s.p_value,
    aapc_slope_log10,
    aapc,
    series_trend,
    cast(series_deaths as bigint) as series_deaths
from segments
