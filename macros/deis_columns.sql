{#- Column rules shared by the DEIS staging models (docs/deis-layouts.md). -#}

{#- DEIS commune codes are integers without the leading zero: 5-character text, NULL when blank;
    a code that is not a number is kept as written (it then fails the reference lookup). -#}
{% macro deis_commune_code(column) -%}
    coalesce(lpad(cast(try_cast(trim({{ column }}) as integer) as varchar), 5, '0'), nullif(trim({{ column }}), ''))
{%- endmacro %}


{#- Why a record's commune of residence cannot be used: blank or 99999 (DEIS "unknown") is
    commune_missing; a code absent from the reference list of 346 communes is commune_unknown. -#}
{% macro deis_commune_problem(code_column) -%}
    case
        when {{ code_column }} is null or {{ code_column }} = '99999' then 'commune_missing'
        when {{ code_column }} not in (select codigo_comuna from {{ ref('communes_chile') }}) then 'commune_unknown'
    end
{%- endmacro %}


{#- Sex as published (deaths: Hombre/Mujer/Indeterminado; births: 1/2/9) in English. -#}
{% macro deis_sex(column) -%}
    case upper(trim({{ column }}))
        when 'HOMBRE' then 'male'
        when '1' then 'male'
        when 'MUJER' then 'female'
        when '2' then 'female'
        when 'INDETERMINADO' then 'undetermined'
        when '9' then 'undetermined'
        else 'unknown'
    end
{%- endmacro %}


{#- Whether a staged record can be counted in a commune-year: it needs a year and a known
    commune. The counts and the audit both use this one rule, so they reconcile. -#}
{% macro deis_is_assignable(record_problem_column, year_column) -%}
    ({{ year_column }} is not null
        and coalesce({{ record_problem_column }}, '') not in ('year_unparseable', 'commune_missing', 'commune_unknown'))
{%- endmacro %}


{#- methods.md: a death with a blank or unknown age unit joins the explicit infant-age-unknown
    bucket (default); var unknown_age_unit_policy: exclude leaves it out of the infant counts. -#}
{% macro deis_unknown_unit_is_infant() -%}
    {{ return(checked_var('unknown_age_unit_policy') == 'infant_age_unknown') }}
{%- endmacro %}
