{#- The schema follows the layer prefix of the model's name, so a room folder can hold its
    intermediate models and its marts side by side: stg_ -> staging, int_ -> intermediate, any
    other model -> marts (what users query as `marts.<name>`). A configured schema (seeds:
    `reference`) is used as is, not prefixed with the target's (`marts`, not `main_marts`). -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is not none -%}{{ custom_schema_name | trim }}
    {%- elif node.resource_type != 'model' -%}{{ target.schema }}
    {%- elif node.name.startswith('stg_') -%}staging
    {%- elif node.name.startswith('int_') -%}intermediate
    {%- else -%}marts
    {%- endif -%}
{%- endmacro %}
