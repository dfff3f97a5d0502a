-- The covariates that place each commune among its peers (docs/methods/inequity.md, "Peers"): the 2022
-- income and multidimensional poverty rates (usable values of int_stratifier_values) and the
-- log10 of the estimated population (communes_chile), one row per commune of dim_commune.
-- `has_all_covariates` is false where one is missing (Antártica, 12202, has no 2022 poverty
-- estimate): such a commune has no peers and is nobody's peer.
with communes as (
    select commune_code, population_estimate from {{ ref('stg_reference__communes') }}
),

poverty as (
    select commune_code, stratifier, value
    from {{ ref('int_stratifier_values') }}
    where problem is null and stratifier in ('income_poverty_2022', 'multidimensional_poverty_2022')
),

joined as (
    select
        communes.commune_code,
        max(case when poverty.stratifier = 'income_poverty_2022' then poverty.value end) as income_poverty_2022,
        max(case when poverty.stratifier = 'multidimensional_poverty_2022' then poverty.value end)
            as multidimensional_poverty_2022,
        case when max(communes.population_estimate) > 0 then log10(max(communes.population_estimate)) end
            as log10_population
    from communes
    left join poverty on communes.commune_code = poverty.commune_code
    group by communes.commune_code
)

select
    *,
    income_poverty_2022 is not null and multidimensional_poverty_2022 is not null and log10_population is not null
        as has_all_covariates
from joined
