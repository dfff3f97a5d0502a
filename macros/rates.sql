{#- Rate per 1000 live births, and its exact Poisson (Garwood) limits via the imr_poisson_* UDFs
    registered by python/infant_mortality/dbt_plugins/duckdb_plugin.py. Null when the count is unavailable
    or there are no births: a rate is never guessed. Arguments may be expressions. -#}
{% macro rate_per_1000(deaths, births) -%}
    case when ({{ births }}) > 0 and ({{ deaths }}) >= 0 then 1000.0 * ({{ deaths }}) / ({{ births }}) end
{%- endmacro %}

{% macro poisson_rate_limit(bound, deaths, births, level=0.95) -%}
    {%- if bound not in ('lower', 'upper') or level is boolean or level is not number or not (0 < level < 1) -%}
        {{ exceptions.raise_compiler_error("poisson_rate_limit: bound must be 'lower' or 'upper' and level a number in (0, 1); got " ~ bound ~ ", " ~ level) }}
    {%- endif -%}
    case when ({{ births }}) > 0 and ({{ deaths }}) >= 0
        then 1000.0 * imr_poisson_{{ bound }}({{ deaths }}, {{ level }}) / ({{ births }}) end
{%- endmacro %}
