{#- Fails with the rows whose label contradicts the interval published beside it: `above` with a
    lower limit at or below `null_value`, `below` with an upper limit at or above it, `neutral`
    with an interval that excludes it, or a label of the three with no interval. Other labels
    (not_estimable, ...) are not tested. -#}
{% test label_agrees_with_interval(model, column_name, lower, upper, null_value, above, below, neutral) %}
select *
from {{ model }}
where ({{ column_name }} = {{ sql_string(above) }} and not ({{ lower }} > {{ null_value }}))
    or ({{ column_name }} = {{ sql_string(below) }} and not ({{ upper }} < {{ null_value }}))
    or ({{ column_name }} = {{ sql_string(neutral) }} and not ({{ lower }} <= {{ null_value }} and {{ upper }} >= {{ null_value }}))
    or ({{ column_name }} in ({{ sql_string(above) }}, {{ sql_string(below) }}, {{ sql_string(neutral) }})
        and ({{ lower }} is null or {{ upper }} is null))
{% endtest %}
