{#- The analysis scope (dbt vars `scope_regions`, `scope_year_start`, `scope_year_end`) as a SQL
    predicate on a region code and a year column. Empty / null vars mean "everything present".
    The values are checked by vars_spec (region codes of 1-2 digits, whole years), so only
    quoted 2-character codes and integers reach the SQL. A scope that selects no data stops the
    build in tests/dbt/assert_scope_selects_data.sql. -#}
{% macro in_scope(region_code_column, year_column) -%}
    {%- set regions = setting('scope_regions') -%}
    (true
    {%- if regions %} and {{ region_code_column }} in ({% for code in regions %}{{ sql_string(code) }}{% if not loop.last %}, {% endif %}{% endfor %}){% endif %}
    and {{ in_year_scope(year_column) }})
{%- endmacro %}

{% macro in_year_scope(year_column) -%}
    {%- set year_start = setting('scope_year_start') -%}
    {%- set year_end = setting('scope_year_end') -%}
    (true
    {%- if year_start is not none %} and {{ year_column }} >= {{ year_start }}{% endif %}
    {%- if year_end is not none %} and {{ year_column }} <= {{ year_end }}{% endif %})
{%- endmacro %}

{#- Which input mode is active (checked against vars_spec). The models do not branch on it:
    dbt_project.yml enables the mode's folders. -#}
{% macro vital_source() -%}
    {{ return(setting('vital_source')) }}
{%- endmacro %}

{#- A span of years as people write it: '2017-2019', or '2020' for a single year. -#}
{% macro year_span_label(first_year, last_year) -%}
    case when {{ last_year }} > {{ first_year }}
        then cast({{ first_year }} as varchar) || '-' || cast({{ last_year }} as varchar)
        else cast({{ first_year }} as varchar) end
{%- endmacro %}
