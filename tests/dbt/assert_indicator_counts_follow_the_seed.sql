-- The seed `indicators` is the one list of indicator codes. Fails with one row per problem:
-- a count row whose indicator is not in the seed, an indicator the seed says this input mode
-- gives that has no count row, and (microdata mode) deaths that are not the seed's
-- deis_count_column of int_deis__commune_year_counts.
{% if vital_source() == 'deis_microdata' %}
-- depends_on: {{ ref('int_deis__commune_year_counts') }}
{% endif %}
with seed as (
    select * from {{ ref('indicators') }}
),

counts as (
    select distinct indicator from {{ ref('int_commune_year_counts') }}
),

not_in_seed as (
    select 'indicator not in seeds/indicators.csv' as problem, counts.indicator
    from counts
    left join seed on counts.indicator = seed.indicator
    where seed.indicator is null
),

missing_from_counts as (
    select 'indicator of the seed has no counts in this input mode' as problem, seed.indicator
    from seed
    left join counts on seed.indicator = counts.indicator
    where counts.indicator is null
        {% if vital_source() == 'ine_aggregates' %}and seed.in_aggregates{% endif %}
)

{% if vital_source() == 'deis_microdata' and execute %}
    {% set count_columns = run_query("select indicator, deis_count_column from " ~ ref('indicators')) %}
, wrong_count_column as (
    {% for row in count_columns.rows %}
    select 'deaths differ from the seed''s deis_count_column' as problem, indicator
    from {{ ref('int_deis__commune_year_counts') }}
    where indicator = {{ sql_string(row[0]) }} and deaths is distinct from {{ adapter.quote(row[1]) }}
    union all
    {% endfor %}
    select null, null where false
)
{% else %}
, wrong_count_column as (
    select null as problem, null as indicator where false
)
{% endif %}

select * from not_in_seed
union all
select * from missing_from_counts
union all
select * from wrong_count_column
