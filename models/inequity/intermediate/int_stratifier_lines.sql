-- Every line of the covariate files, named with its stratifier (seed `stratifiers`): one
-- `union all` per staging model, and nothing else, so that a new stratifier is one line here
-- and int_stratifier_values (the checks, unit-tested) is not touched. Ephemeral: a step of
-- int_stratifier_values, not a table of its own.
{{ config(materialized = 'ephemeral') }}

select 'income_poverty_2013' as stratifier, commune_code, value_text, value, source_file, source_line
from {{ ref('stg_covariates__income_poverty_2013') }}
union all
select 'social_priority_index_2019', commune_code, value_text, value, source_file, source_line
from {{ ref('stg_covariates__social_priority_index_2019') }}
union all
select
    case poverty_dimension
        when 'income' then 'income_poverty_2022'
        when 'multidimensional' then 'multidimensional_poverty_2022'
    end,
    commune_code, value_text, value, source_file, source_line
from {{ ref('stg_covariates__poverty_2022') }}
