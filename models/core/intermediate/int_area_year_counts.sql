-- Counts at every area level: each commune, each region (sum over its communes) and, when the
-- scope has more than one region, the country (sum over everything in scope).
-- An aggregate is only as good as its parts (docs/methods/core.md, "Regions and the country"). A region or the country has
-- a count only when every commune-year inside has counts (else `*_incomplete`, deaths and births
-- null: never a silently smaller sum) and every one is poolable (else `*_commune_out_of_bounds`).
-- Poolable includes the bounded case: a commune-year whose derived count lies outside
-- [0, live births] by at most var('derived_count_tolerance') deaths (Providencia 2018: -2; Río
-- Verde 2016: 3 deaths, 0 births) has no rate of its own but enters the sums signed, because at
-- region level the mismatches between the two source releases (a death placed in one commune by
-- INE and in another by DEIS) cancel out: this is the region-level derivation itself.
-- `communes_unavailable` says how many communes inside had no rate of their own.
-- `births_basis` says which births the rate divides by (var births_denominator): an area whose
-- communes differ is `mixed`, and count_basis says so in words.
with communes as (
    select * from {{ ref('int_commune_year_counts') }}
    where region_code is not null
),

reference as (
    select distinct region_code, region_name from {{ ref('stg_reference__communes') }}
),

commune_rows as (
    select
        'commune' as area_level,
        commune_code as area_code,
        commune_name as area_name,
        region_code,
        year,
        indicator,
        multiplier,
        deaths,
        live_births,
        births_basis,
        registered_live_births,
        corrected_live_births,
        {{ count_basis_with_births('count_basis', 'births_basis') }} as count_basis,
        count_problem,
        case when count_problem is null then 0 else 1 end as communes_unavailable
    from communes
),

{% set aggregate_columns %}
        case when count(deaths) = count(*) then sum(deaths) end as deaths,
        case when count(live_births) = count(*) then sum(live_births) end as live_births,
        {{ births_basis_of_sum('births_basis') }} as births_basis,
        case when count(registered_live_births) = count(*) then sum(registered_live_births) end as registered_live_births,
        -- Only when every commune inside has a corrected figure: a part-corrected sum is neither.
        case when count(corrected_live_births) = count(*) then sum(corrected_live_births) end as corrected_live_births,
        {{ count_basis_with_births('min(count_basis)', births_basis_of_sum('births_basis')) }} as count_basis
{%- endset %}
{% set aggregate_problem %}
        case
            when count(deaths) < count(*) or count(live_births) < count(*) then 'LEVEL_incomplete'
            when sum(case when is_poolable then 0 else 1 end) > 0 then 'LEVEL_commune_out_of_bounds'
            -- Every commune poolable but no live birth in the whole area: a rate is undefined.
            when sum(live_births) = 0 then 'LEVEL_no_live_births'
        end as count_problem,
        sum(case when count_problem is null then 0 else 1 end) as communes_unavailable
{%- endset %}

region_rows as (
    select
        'region' as area_level,
        communes.region_code as area_code,
        reference.region_name as area_name,
        communes.region_code,
        year,
        indicator,
        multiplier,
        {{ aggregate_columns }},
        {{ aggregate_problem | replace('LEVEL', 'region') }}
    from communes
    left join reference on communes.region_code = reference.region_code
    group by communes.region_code, reference.region_name, year, indicator, multiplier
),

country_rows as (
    select
        'country' as area_level,
        'CL' as area_code,
        'Chile' as area_name,
        cast(null as varchar) as region_code,
        year,
        indicator,
        multiplier,
        {{ aggregate_columns }},
        {{ aggregate_problem | replace('LEVEL', 'country') }}
    from communes
    group by year, indicator, multiplier
    having (select count(distinct region_code) from communes) > 1
)

select * from commune_rows
union all
select * from region_rows
union all
select * from country_rows
