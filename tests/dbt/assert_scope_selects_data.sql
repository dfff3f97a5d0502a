-- The scope vars must select data. A region or a year range with no data stops the build here,
-- right after the input counts are built and before anything is computed from them, with a
-- message naming what is missing and what the input has (not as a failed not_null far
-- downstream). DuckDB's error() is in the WHERE clause so that dbt's count(*) over this test
-- cannot optimise it away.
{% set regions = setting('scope_regions') %}
{% set year_start = setting('scope_year_start') %}
{% set year_end = setting('scope_year_end') %}

with input_counts as (
    select counts.year, communes.region_code
    from {{ ref('int_input__commune_year_counts') }} as counts
    left join {{ ref('stg_reference__communes') }} as communes
        on counts.commune_code = communes.commune_code
),

present as (
    select
        string_agg(distinct region_code, ', ' order by region_code) as regions,
        cast(min(year) as varchar) || '-' || cast(max(year) as varchar) as years
    from input_counts
),

missing as (
    {% for code in regions %}
    select 'region ' || {{ sql_string(code) }} as what
    where not exists (select 1 from input_counts where region_code = {{ sql_string(code) }})
    union all
    {% endfor %}
    select
        'years {{ year_start if year_start is not none else "..." }}-{{ year_end if year_end is not none else "..." }}' as what
    where not exists (select 1 from input_counts where {{ in_year_scope('year') }})
)

select missing.what
from missing
cross join present
where error(
    'no data for ' || missing.what || ' (the input has regions ' || coalesce(present.regions, 'none')
    || ', years ' || coalesce(present.years, 'none')
    || '): check the dbt vars scope_regions, scope_year_start and scope_year_end'
) is null
