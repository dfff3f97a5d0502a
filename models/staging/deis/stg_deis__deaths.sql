{{ config(materialized = 'table') }}

-- One row per record of the DEIS deaths file(s), nothing dropped. Ages are classified for the
-- infant indicators (docs/deis-layouts.md); a record that cannot be counted cleanly says why in
-- record_problem (the first problem found, in the order of the final coalesce).

with records as (
    {{ deis_read('deaths', [
        'ano_def', 'fecha_def', 'glosa_sexo', 'edad_tipo', 'edad_cant',
        'codigo_comuna_residencia', 'glosa_comuna_residencia', 'glosa_reg_res',
        'diag1', 'diag2', 'lugar_defuncion']) }}
),

typed as (
    select
        source_file,
        source_line,
        try_cast(trim(ano_def) as integer) as year_of_death,
        try_cast(trim(fecha_def) as date) as date_of_death,
        {{ deis_sex('glosa_sexo') }} as sex,
        try_cast(trim(edad_tipo) as integer) as age_unit_code,
        try_cast(trim(edad_cant) as integer) as age_amount,
        {{ deis_commune_code('codigo_comuna_residencia') }} as commune_code,
        trim(glosa_comuna_residencia) as commune_name,
        trim(glosa_reg_res) as region_name,
        -- Codes without the dot, as DEIS publishes them (P073); ICD-9 before 1997.
        nullif(upper(replace(trim(diag1), '.', '')), '') as cause_icd10,
        nullif(upper(replace(trim(diag2), '.', '')), '') as external_cause_icd10,
        trim(lugar_defuncion) as place_of_death
    from records
),

-- Hours and days on one scale, so 24 hours is day 1 and 168 hours is day 7.
aged as (
    select
        *,
        case age_unit_code
            when 3 then cast(age_amount as double)
            when 4 then age_amount / 24.0
        end as age_in_days,
        age_unit_code is null or age_unit_code not in (1, 2, 3, 4) as is_age_unit_unknown
    from typed
),

classified as (
    select
        *,
        case
            -- A blank, 0, 9 or other unit is never read as years.
            when is_age_unit_unknown then 'age_unit_unknown'
            -- Units months, days and hours are only used inside the first year.
            when age_amount is null or age_amount < 0 then
                case when age_unit_code = 1 then 'age_amount_unknown' else 'infant_age_unknown' end
            when age_unit_code = 1 then
                case when age_amount = 0 then 'infant_age_unknown' else 'not_infant' end
            when age_unit_code = 2 then
                case
                    when age_amount = 0 then 'infant_age_unknown'
                    when age_amount <= 11 then 'post_neonatal'
                    else 'not_infant'
                end
            when age_in_days < 7 then 'early_neonatal'
            when age_in_days < 28 then 'late_neonatal'
            when age_in_days < 366 then 'post_neonatal'
            else 'not_infant'
        end as age_class,
        case
            when is_age_unit_unknown then 'age_unit_unknown'
            when age_amount is null or age_amount < 0 then 'age_out_of_range'
            when age_unit_code = 4 and age_amount > 24 then 'age_out_of_range'
            when age_unit_code = 3 and age_amount > 365 then 'age_out_of_range'
            when age_unit_code = 2 and age_amount >= 12 then 'age_out_of_range'
            when age_unit_code = 1 and age_amount > 130 then 'age_out_of_range'
            when age_unit_code = 2 and age_amount = 0 then 'infant_age_month_zero'
        end as age_problem,
        {{ deis_commune_problem('commune_code') }} as commune_problem
    from aged
)

select
    source_file,
    source_line,
    year_of_death,
    date_of_death,
    sex,
    age_unit_code,
    age_amount,
    commune_code,
    commune_name,
    region_name,
    cause_icd10,
    external_cause_icd10,
    place_of_death,
    age_class,
    extract(year from date_of_death) <> year_of_death as is_date_year_mismatch,
    coalesce(
        case when year_of_death is null then 'year_unparseable' end,
        commune_problem,
        age_problem,
        case
            when date_of_death is null then 'unparseable_date'
            when extract(year from date_of_death) <> year_of_death then 'date_year_mismatch'
        end
    ) as record_problem
from classified
