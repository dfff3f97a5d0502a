-- Microdata mode: each indicator's deaths are the column of int_deis__commune_year_counts that
-- the seed `indicators` names in count_column (one row per mismatching commune-year).
-- Which indicators exist at all is tested on dim_indicator. (Select the seed too when building
-- a subset with --select: this test reads it.)
-- It checks a private model of the inputs room, so it belongs to that room's group.
{{ config(group='inputs') }}
{% if vital_source() == 'deis_microdata' %}
-- depends_on: {{ ref('int_deis__commune_year_counts') }}
-- depends_on: {{ ref('indicators') }}
{% if execute %}
{% set mapping = run_query("select indicator, count_column from " ~ ref('indicators')) %}
{% for row in mapping.rows %}
select indicator, commune_code, year, deaths, {{ adapter.quote(row[1]) }} as seed_count_column
from {{ ref('int_deis__commune_year_counts') }}
where indicator = {{ sql_string(row[0]) }} and deaths is distinct from {{ adapter.quote(row[1]) }}
union all
{% endfor %}
{% endif %}
{% endif %}
select null as indicator, null as commune_code, null as year, null as deaths, null as seed_count_column
where false
