{#- Vars are data, not SQL. Every var that reaches SQL goes through one of these: text becomes a
    quoted literal (apostrophes doubled, so a path like "región O'Higgins" works and a crafted
    value cannot end the string), numbers are checked and cast, and a bad value stops the build
    with a message naming the var. A var listed in vars_spec (macros/validate_vars.sql) is first
    checked against it, so the message also says what the var may hold. -#}
{% macro sql_string(value) -%}
    '{{ value | string | replace("'", "''") }}'
{%- endmacro %}

{#- The var's value, checked against vars_spec when it has an entry there. -#}
{% macro checked_var(name) -%}
    {{ return(setting(name) if name in vars_spec() else var(name)) }}
{%- endmacro %}

{% macro string_var(name) -%}
    {{ return(sql_string(checked_var(name))) }}
{%- endmacro %}

{% macro int_var(name) -%}
    {%- set value = checked_var(name) -%}
    {%- if value is boolean or not (value is integer or modules.re.match('^-?[0-9]+$', value | string)) -%}
        {{ exceptions.raise_compiler_error("dbt var " ~ name ~ " must be a whole number, got '" ~ value ~ "'") }}
    {%- endif -%}
    {{ return(value | int) }}
{%- endmacro %}

{% macro number_var(name) -%}
    {%- set value = checked_var(name) -%}
    {%- if value is boolean or not (value is number or modules.re.match('^-?[0-9]+([.][0-9]+)?$', value | string)) -%}
        {{ exceptions.raise_compiler_error("dbt var " ~ name ~ " must be a number, got '" ~ value ~ "'") }}
    {%- endif -%}
    {{ return(value | float) }}
{%- endmacro %}

{% macro bool_var(name) -%}
    {%- set value = checked_var(name) -%}
    {%- if value is not boolean -%}
        {{ exceptions.raise_compiler_error("dbt var " ~ name ~ " must be true or false, got '" ~ value ~ "'") }}
    {%- endif -%}
    {{ return(value) }}
{%- endmacro %}
