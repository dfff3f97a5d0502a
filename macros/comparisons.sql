{#- The comparison arithmetic of an area against a reference (its region, its benchmark), in one
    place for every mart that compares (docs/methods/comparisons.md and docs/methods/inequity.md). Arguments are SQL
    expressions; `nested` is a SQL boolean: true when the area's counts are part of the
    reference's (a commune inside its region, a benchmark commune against itself or a pool that
    holds it), which makes the two counts positively correlated. -#}

{#- The standard normal 0.975 quantile: the 95% Wald and log-scale intervals. -#}
{% macro z95() -%}
    1.959963984540054
{%- endmacro %}

{#- Standard error of ln(RT), RT = rate / reference rate: sqrt(1/d + 1/D), or sqrt(1/d - 1/D)
    when nested. Null without deaths on either side (no log-scale interval). -#}
{% macro log_rate_ratio_se(deaths, reference_deaths, nested) -%}
    case when ({{ deaths }}) > 0 and ({{ reference_deaths }}) > 0
        then sqrt(greatest(1.0 / ({{ deaths }}) + case when {{ nested }} then -1.0 else 1.0 end / ({{ reference_deaths }}), 0)) end
{%- endmacro %}

{#- A 95% limit of a ratio on the log scale: exp(ln(ratio) -/+ z se). -#}
{% macro log_scale_limit(bound, ratio, log_se) -%}
    {%- if bound not in ('lower', 'upper') -%}
        {{ exceptions.raise_compiler_error("log_scale_limit: bound must be 'lower' or 'upper', got " ~ bound) }}
    {%- endif -%}
    exp(ln({{ ratio }}) {{ '-' if bound == 'lower' else '+' }} {{ z95() }} * ({{ log_se }}))
{%- endmacro %}

{#- Standard error of RAP = rate - reference rate (Poisson variance of each count, minus the
    covariance 2 d / (n N) when nested), on the rates' scale. -#}
{% macro excess_rate_se(deaths, births, reference_deaths, reference_births, nested, multiplier) -%}
    ({{ multiplier }}) * sqrt(greatest(
        ({{ deaths }}) / (({{ births }}) * ({{ births }}))
        + ({{ reference_deaths }}) / (({{ reference_births }}) * ({{ reference_births }}))
        - case when {{ nested }} then 2.0 * ({{ deaths }}) / (({{ births }}) * ({{ reference_births }})) else 0 end,
        0))
{%- endmacro %}

{#- RAP% = 100 (rate - reference rate) / rate; null when the rate is 0. -#}
{% macro attributable_percent(rate, reference_rate) -%}
    100.0 * (({{ rate }}) - ({{ reference_rate }})) / nullif({{ rate }}, 0)
{%- endmacro %}
