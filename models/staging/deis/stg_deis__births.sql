{{ config(materialized = 'table') }}

-- One row per record of the DEIS births base(s), nothing dropped. The commune is the mother's
-- commune of residence; record_problem says why a record cannot be counted in a commune-year.

with records as (
    {{ deis_read('births', [
        'ano_nac', 'mes_nac', 'dia_nac', 'sexo', 'peso', 'talla', 'semanas', 'edad_m',
        'comuna', 'glosa_comuna', 'region']) }}
),

typed as (
    select
        source_file,
        source_line,
        try_cast(trim(ano_nac) as integer) as birth_year,
        try_cast(trim(mes_nac) as integer) as birth_month,
        try_cast(trim(dia_nac) as integer) as birth_day,
        {{ deis_sex('sexo') }} as sex,
        try_cast(trim(peso) as integer) as weight_g,
        try_cast(trim(talla) as integer) as length_cm,
        try_cast(trim(semanas) as integer) as gestational_weeks,
        try_cast(trim(edad_m) as integer) as mother_age,
        {{ deis_commune_code('comuna') }} as commune_code,
        trim(glosa_comuna) as commune_name,
        lpad(cast(try_cast(trim(region) as integer) as varchar), 2, '0') as region_code
    from records
),

dated as (
    select
        *,
        try_cast(
            cast(birth_year as varchar) || '-' || lpad(cast(birth_month as varchar), 2, '0')
            || '-' || lpad(cast(birth_day as varchar), 2, '0') as date
        ) as birth_date
    from typed
)

select
    source_file,
    source_line,
    birth_year,
    birth_month,
    birth_day,
    birth_date,
    sex,
    weight_g,
    length_cm,
    gestational_weeks,
    mother_age,
    commune_code,
    commune_name,
    region_code,
    coalesce(
        {{ deis_commune_problem('commune_code') }},
        case when birth_date is null then 'unparseable_date' end
    ) as record_problem
from dated
