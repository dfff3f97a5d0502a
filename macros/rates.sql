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

{#- Which births an area's rate divides by (var births_denominator, int_commune_year_counts): an
    aggregate of communes says `mixed` when its communes' births_basis differ (the country with
    the RM on corrected births and the other regions on registered ones), never one of them. -#}
{% macro births_basis_of_sum(births_basis) -%}
    case when min({{ births_basis }}) = max({{ births_basis }}) then min({{ births_basis }}) else 'mixed' end
{%- endmacro %}

{#- count_basis with the births it used, where they are not the input's registered births. -#}
{% macro count_basis_with_births(count_basis, births_basis) -%}
    ({{ count_basis }} || case {{ births_basis }}
        when 'corrected' then '; live births: DEIS-corrected ({{ corrected_births_file() }})'
        when 'registered_no_corrected_figure' then '; live births: registered (births_denominator corrected, but no DEIS-corrected figure here)'
        when 'mixed' then '; live births: DEIS-corrected where published ({{ corrected_births_file() }}), registered elsewhere (births_basis)'
        else '' end)
{%- endmacro %}

{#- The bundled corrected births file's name, as count_basis and the docs cite it. -#}
{% macro corrected_births_file() -%}
    {{ return('data/raw/seremi_rm_corrected_births_1992_2021.csv') }}
{%- endmacro %}
