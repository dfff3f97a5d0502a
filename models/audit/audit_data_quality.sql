-- Every problem found in the inputs, one row each, so that a SQL user sees what was excluded
-- and why. Record-level problems of the microdata carry their file and line.
-- int_input__audit comes from the input mode's folder (dbt_project.yml enables one).
{% set parts = [ref('int_audit__count_problems'), ref('int_input__audit'), ref('int_audit__covariates')] %}
{# Maps (issue 14): where the commune polygons disagree with the commune reference. #}
{% do parts.append(ref('int_audit__commune_boundaries')) %}
{# External anchor (issue 27): national deaths far from UN IGME's. #}
{% do parts.append(ref('int_audit__external_benchmarks')) %}
{# Official anchors (issue 42): a region's (the country's) rate far from MINSAL's. #}
{% do parts.append(ref('int_audit__official_anchors')) %}
{# Denominator choice (issue 42): the bundled corrected births' gaps and region totals. #}
{% do parts.append(ref('int_audit__corrected_births')) %}

{% for part in parts %}
select
    source,
    source_file,
    cast(source_line as bigint) as source_line,
    record_key,
    commune_code,
    cast(year as integer) as year,
    indicator,
    check_name,
    observed_value,
    cast(records_affected as bigint) as records_affected,
    consequence,
    affects_results
from {{ part }}
{% if not loop.last %}union all{% endif %}
{% endfor %}
