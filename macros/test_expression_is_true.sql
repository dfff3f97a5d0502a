{#- Fails with the rows for which `expression` is false; restrict rows with the test's `where` config. -#}
{% test expression_is_true(model, expression, column_name=none) %}
select *
from {{ model }}
where not ({{ expression }})
{% endtest %}
