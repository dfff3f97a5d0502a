-- How this warehouse was built: one row.
{#- vars_json: every var with a value in this build -- the names declared in dbt_project.yml's
    vars block (read from the file by DuckDB, as Jinja cannot read files) plus any passed with
    --vars (invocation_args_dict) -- each with its effective value, var(name). -#}
{%- set values = {} -%}
{%- if execute -%}
    {%- set project_file = run_query("select content from read_text('dbt_project.yml')").columns[0].values()[0] -%}
    {%- set passed = invocation_args_dict.get('vars') or {} -%}
    {%- if passed is string %}{% set passed = fromyaml(passed) or {} %}{% endif -%}
    {%- for name in (fromyaml(project_file)['vars'] | list) + (passed | list) -%}
        {%- do values.update({name: var(name)}) -%}
    {%- endfor -%}
{%- endif %}

with counts as (
    select * from {{ ref('int_commune_year_counts') }}
),

git as (
    select * from {{ ref('int_build_git') }}
),

input_files as (
    select coalesce(
        to_json(list(
            { 'input': input, 'entry': entry, 'size_bytes': size_bytes, 'sha256': sha256, 'layout': layout }
            order by input, entry)),
        '[]') as input_files_json
    from {{ ref('audit_input_files') }}
    where entry_type = 'file' or entry_type = 'zip_member'
),

-- The headline trend method and its name as its fitter states it (the report writes no literal).
headline_trend as (
    select
        {{ string_var('trend_method') }} as trend_method,
        min(method_label) as trend_method_label
    from {{ ref('fct_trends') }}
    where method = {{ string_var('trend_method') }}
),

scope as (
    select
        {{ count_basis_with_births("string_agg(distinct count_basis, '; ' order by count_basis)",
                                   births_basis_of_sum('births_basis')) }} as count_basis,
        string_agg(distinct region_code, ',' order by region_code) as scope_regions,
        min(year) as scope_year_start,
        max(year) as scope_year_end
    from counts
    where region_code is not null
)

select
    {{ sql_string(invocation_id) }} as build_id,
    cast({{ sql_string(run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f')) }} as timestamp) as built_at,
    git.git_commit,
    git.git_note,
    {{ sql_string(dbt_version) }} as dbt_version,
    (select library_version from pragma_version()) as duckdb_version,
    {{ string_var('vital_source') }} as vital_source,
    scope.count_basis,
    scope.scope_regions,
    cast(scope.scope_year_start as integer) as scope_year_start,
    cast(scope.scope_year_end as integer) as scope_year_end,
    headline_trend.trend_method,
    headline_trend.trend_method_label,
    cast({{ number_var('trend_ci_level') }} as double) as trend_ci_level,
    cast({{ number_var('exceedance_probability_threshold') }} as double) as exceedance_probability_threshold,
    {{ sql_string(tojson(values, sort_keys=true)) }} as vars_json,
    cast(input_files.input_files_json as varchar) as input_files_json
from scope
cross join git
cross join input_files
cross join headline_trend
