-- Every covariate value as a stratifier: one row per line of the covariate files, named with
-- the stratifier names of the seed `stratifiers`, which also says which way is deprived and the
-- valid range of a value. The lines come from int_stratifier_lines (one line per file there).
-- `problem` is null for a usable value; otherwise the row is kept here, audited
-- (int_audit__covariates) and left out of every inequality measure.
with all_values as (
    select * from {{ ref('int_stratifier_lines') }}
),

communes as (
    select commune_code, commune_name, region_code from {{ ref('stg_reference__communes') }}
),

stratifiers as (
    select stratifier, higher_is_more_deprived, value_min, value_max from {{ ref('stratifiers') }}
),

checked as (
    select
        all_values.*,
        communes.commune_name,
        communes.region_code,
        stratifiers.stratifier is not null as is_declared,
        stratifiers.higher_is_more_deprived,
        stratifiers.value_min,
        stratifiers.value_max,
        count(*) over (partition by all_values.stratifier, all_values.commune_code) as n_rows_for_commune
    from all_values
    left join communes on all_values.commune_code = communes.commune_code
    left join stratifiers on all_values.stratifier = stratifiers.stratifier
)

select
    stratifier,
    commune_code,
    commune_name,
    region_code,
    value_text,
    value,
    source_file,
    cast(source_line as bigint) as source_line,
    case
        when not is_declared then 'stratifier_unknown'
        when region_code is null then 'commune_unknown'
        when n_rows_for_commune > 1 then 'commune_duplicated'
        when value is null then 'value_not_numeric'
        when value < value_min or value > value_max or isnan(value) then 'value_out_of_range'
    end as problem
from checked
