-- Bundled-data mode: problems in the inputs that do not show up as a commune-year count problem.

-- DEIS deaths aged 1+ whose commune of residence is unknown (99999) cannot be subtracted from
-- any commune's all-age deaths; reported per year so the size of the problem is visible.
with unknown_commune_deaths as (
    select year, sum(deaths) as deaths
    from {{ ref('stg_deis_aggregates__deaths_by_age_group') }}
    where commune_code = '99999' and age_group = '1+'
        and {{ in_year_scope('year') }}
        and year between (select min(year) from {{ ref('int_commune_year_counts') }})
            and (select max(year) from {{ ref('int_commune_year_counts') }})
    group by year
)

select
    'deis_deaths_aggregated' as source,
    'data/raw/deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv' as source_file,
    cast(null as bigint) as source_line,
    'commune=99999 year=' || cast(year as varchar) as record_key,
    '99999' as commune_code,
    year,
    cast(null as varchar) as indicator,
    'commune_unknown' as check_name,
    'deaths aged 1+=' || cast(deaths as varchar) as observed_value,
    cast(deaths as bigint) as records_affected,
    'deaths with unknown commune of residence are not assigned to any commune' as consequence,
    false as affects_results
from unknown_commune_deaths
