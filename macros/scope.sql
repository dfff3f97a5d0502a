{#- The analysis scope (dbt vars `scope_regions`, `scope_year_start`, `scope_year_end`) as a SQL
    predicate on a region code and a year column. Empty / null vars mean "everything present". -#}
{% macro in_scope(region_code_column, year_column) -%}
    {%- set regions = var('scope_regions', []) -%}
    (true
    {%- if regions %} and {{ region_code_column }} in ({% for r in regions %}'{{ "%02d" | format(r | int) }}'{% if not loop.last %}, {% endif %}{% endfor %}){% endif %}
    and {{ in_year_scope(year_column) }})
{%- endmacro %}

{% macro in_year_scope(year_column) -%}
    {%- set year_start = var('scope_year_start', none) -%}
    {%- set year_end = var('scope_year_end', none) -%}
    (true
    {%- if year_start is not none %} and {{ year_column }} >= {{ year_start | int }}{% endif %}
    {%- if year_end is not none %} and {{ year_column }} <= {{ year_end | int }}{% endif %})
{%- endmacro %}

{#- Which input mode feeds the counts; stops the build on a value we do not know. -#}
{% macro vital_source() -%}
    {%- set source = var('vital_source') -%}
    {%- if source not in ['ine_aggregates', 'deis_microdata'] -%}
        {{ exceptions.raise_compiler_error("dbt var vital_source must be 'ine_aggregates' or 'deis_microdata', got '" ~ source ~ "'") }}
    {%- endif -%}
    {{ return(source) }}
{%- endmacro %}
