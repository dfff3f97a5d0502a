{{ config(materialized = 'table') }}

-- One row per record of the DEIS deaths file(s), nothing dropped, whatever their layout (the
-- official-figures file or the older per-year layout, mixed in one folder). Ages are classified
-- for the infant indicators (docs/using/deis-layouts.md); a record that cannot be counted cleanly says
-- why in record_problem (the first problem found, in the order of the final coalesce). Fields
-- no model uses (sex, place of death, the names of the cause's groups) are read only as part of
-- their line (column count, encoding) and not stored.

with records as (
    {{ deis_read('deaths', [
        'ano_def', 'fecha_def', 'mes_def', 'dia_def', 'edad_tipo', 'edad_cant',
        'codigo_comuna_residencia', 'glosa_comuna_residencia', 'glosa_reg_res', 'reg_res',
        'diag1', 'diag2']) }}
),

typed as (
    select
        source_file,
        source_line,
        source_layout,
        {{ deis_year('ano_def') }} as year_of_death,
        trim(ano_def) as year_as_read,
        {{ deis_year_problem('ano_def') }} as year_problem,
        -- The official file has FECHA_DEF; the per-year layout has day and month.
        coalesce(
            try_strptime(trim(fecha_def), '%Y-%m-%d')::date,
            -- NULL for an impossible date (30 February, month 13) or a missing part.
            try(make_date({{ deis_whole_number('ano_def') }}, {{ deis_whole_number('mes_def') }},
                          {{ deis_whole_number('dia_def') }}))
        ) as date_of_death,
        contains(source_columns, 'FECHA_DEF') or contains(source_columns, 'MES_DEF') as has_date,
        {{ deis_whole_number('edad_tipo') }} as age_unit_code,
        {{ deis_whole_number('edad_cant') }} as age_amount,
        {{ deis_is_malformed('edad_tipo') }} or {{ deis_is_malformed('edad_cant') }} as is_age_malformed,
        trim(edad_tipo) as age_unit_as_read,
        trim(edad_cant) as age_amount_as_read,
        {{ commune_code_or_text('codigo_comuna_residencia') }} as commune_code_as_read,
        trim(glosa_comuna_residencia) as commune_name,
        trim(glosa_reg_res) as region_name,
        lpad({{ deis_whole_number('reg_res') }}::varchar, 2, '0') as region_code,
        -- Codes without the dot, as DEIS publishes them (P073); ICD-9 before 1997.
        nullif(upper(replace(trim(diag1), '.', '')), '') as cause_icd10,
        nullif(upper(replace(trim(diag2), '.', '')), '') as external_cause_icd10
    from records
),

mapped as (
    select
        typed.*,
        coalesce(crosswalk.new_code, typed.commune_code_as_read) as commune_code,
        crosswalk.mapping as commune_code_mapping
    from typed
    {{ deis_crosswalk_join('crosswalk', 'typed.commune_code_as_read', 'typed.year_of_death', 'typed.source_layout') }}
),

-- Hours and days on one scale, so 24 hours is day 1 and 168 hours is day 7.
aged as (
    select
        *,
        case age_unit_code
            when 3 then age_amount::double
            when 4 then age_amount / 24.0
        end as age_in_days,
        age_unit_code is null or age_unit_code not in (1, 2, 3, 4) as is_age_unit_unknown
    from mapped
),

classified as (
    select
        *,
        case
            -- A blank, 0, 9 or other unit is never read as years.
            when is_age_unit_unknown then 'age_unit_unknown'
            -- Units months, days and hours are only used inside the first year.
            when age_amount is null then
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
            when is_age_malformed then 'age_unparseable'
            when is_age_unit_unknown then 'age_unit_unknown'
            when age_amount is null then 'age_out_of_range'
            when age_unit_code = 4 and age_amount > 24 then 'age_out_of_range'
            when age_unit_code = 3 and age_amount > 365 then 'age_out_of_range'
            when age_unit_code = 2 and age_amount >= 12 then 'age_out_of_range'
            when age_unit_code = 1 and age_amount > 130 then 'age_out_of_range'
            when age_unit_code = 2 and age_amount = 0 then 'infant_age_month_zero'
        end as age_problem,
        {{ deis_commune_problem('commune_code_as_read', 'commune_code_mapping', 'commune_code') }} as commune_problem
    from aged
)

select
    source_file,
    source_line,
    source_layout,
    year_of_death,
    year_as_read,
    date_of_death,
    age_unit_code,
    age_amount,
    age_unit_as_read,
    age_amount_as_read,
    commune_code_as_read,
    {{ deis_usable_commune_code('commune_problem', 'commune_code') }} as commune_code,
    commune_code_mapping,
    commune_name,
    region_name,
    region_code,
    cause_icd10,
    external_cause_icd10,
    age_class,
    coalesce(
        year_problem,
        commune_problem,
        age_problem,
        case when region_code is not null and region_code <> left(commune_code_as_read, 2) then 'region_mismatch' end,
        case
            when not has_date then null
            when date_of_death is null then 'unparseable_date'
            when extract(year from date_of_death) <> year_of_death then 'date_year_mismatch'
        end
    ) as record_problem
from classified
