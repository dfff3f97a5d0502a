{#- Rate per 1000 live births, and its exact Poisson (Garwood) limits via the imr_poisson_* UDFs
    registered by python/infant_mortality/duckdb_plugin.py. Null when the count is unavailable
    or there are no births: a rate is never guessed. Arguments may be expressions. -#}
{% macro rate_per_1000(deaths, births) -%}
    case when ({{ births }}) > 0 and ({{ deaths }}) >= 0 then 1000.0 * ({{ deaths }}) / ({{ births }}) end
{%- endmacro %}

{% macro poisson_rate_limit(bound, deaths, births, level=0.95) -%}
    case when ({{ births }}) > 0 and ({{ deaths }}) >= 0
        then 1000.0 * imr_poisson_{{ bound }}({{ deaths }}, {{ level }}) / ({{ births }}) end
{%- endmacro %}
