{#- A rate: deaths per `multiplier` live births, the indicator's multiplier from the seed
    `indicators` (1000 for every bundled indicator), and its exact Poisson (Garwood) limits via the
    imr_poisson_* UDFs registered by python/infant_mortality/dbt_plugins/duckdb_plugin.py. Null when
    the count is unavailable or there are no births: a rate is never guessed. Arguments are SQL
    expressions; the multiplier is the `multiplier` column that core's counts carry
    (int_commune_year_counts, int_area_year_counts, int_period_pooled_counts, dim_indicator). -#}
{% macro rate(deaths, births, multiplier) -%}
    case when ({{ births }}) > 0 and ({{ deaths }}) >= 0 then ({{ multiplier }}) * ({{ deaths }}) / ({{ births }}) end
{%- endmacro %}

{% macro poisson_rate_limit(bound, deaths, births, multiplier, level=0.95) -%}
    {%- if bound not in ('lower', 'upper') or level is boolean or level is not number or not (0 < level < 1) -%}
        {{ exceptions.raise_compiler_error("poisson_rate_limit: bound must be 'lower' or 'upper' and level a number in (0, 1); got " ~ bound ~ ", " ~ level) }}
    {%- endif -%}
    case when ({{ births }}) > 0 and ({{ deaths }}) >= 0
        then ({{ multiplier }}) * imr_poisson_{{ bound }}({{ deaths }}, {{ level }}) / ({{ births }}) end
{%- endmacro %}

{#- Deaths expected in a population of `births` at a rate per `multiplier` live births. -#}
{% macro expected_deaths(births, rate, multiplier) -%}
    ({{ births }}) * ({{ rate }}) / ({{ multiplier }})
{%- endmacro %}
