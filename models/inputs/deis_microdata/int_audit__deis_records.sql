-- Microdata mode: one audit row per record with a problem (file and line), and totals per
-- problem plus read/assigned totals, so that the counts reconcile with the input row counts;
-- records counted under a current commune through the historical-code crosswalk are totalled per
-- old code. The descriptive text is built for problem records only; the totals are plain counts.

-- Not materialized: each use scans only the columns it needs of the staging table, instead of
-- DuckDB copying every column of every record once to share it (a third of this model's time).
with deaths as not materialized (
    select * from {{ ref('stg_deis__deaths') }}
),

births as not materialized (
    select * from {{ ref('stg_deis__births') }}
),

death_problems as (
    select
        'deis_deaths_microdata' as source,
        source_file,
        source_line,
        commune_code,
        year_of_death as year,
        record_problem,
        'ANO_DEF=' || coalesce(year_as_read, 'blank')
            || ' FECHA_DEF=' || coalesce(cast(date_of_death as varchar), '?')
            || ' EDAD_TIPO=' || coalesce(nullif(age_unit_as_read, ''), 'blank')
            || ' EDAD_CANT=' || coalesce(nullif(age_amount_as_read, ''), 'blank')
            || ' COMUNA=' || coalesce(commune_code_as_read, 'blank')
            || coalesce(' REG_RES=' || region_code, '') as observed_value,
        case
            when record_problem = 'year_outside_window'
                then 'year outside vars input_year_min..input_year_max: counted outside the build''s years'
            when not {{ deis_is_assignable('record_problem', 'year_of_death') }}
                then 'death not assigned to any commune-year: in no rate (see the total row)'
            when record_problem = 'age_unit_unknown' and {{ deis_unknown_unit_is_infant() }}
                then 'counted as an infant death of unknown age: in imr, in no component'
                    || ' (var unknown_age_unit_policy = infant_age_unknown)'
            when record_problem = 'age_unit_unknown'
                then 'age unit unknown: cannot be placed inside or outside the first year; in no infant indicator'
                    || ' (docs/methods/inputs.md)'
            when record_problem = 'infant_age_month_zero'
                then 'counted as an infant death of unknown age: in imr, in no component'
            when record_problem = 'age_out_of_range'
                then 'age outside its unit''s range: classified by its value on the day scale, flagged'
            when record_problem = 'region_mismatch'
                then 'REG_RES disagrees with the region of the commune code: counted by the commune'
            else 'counted by ANO_DEF and commune; the date itself is not used'
        end as consequence,
        record_problem <> 'year_outside_window' and (not {{ deis_is_assignable('record_problem', 'year_of_death') }}
            or record_problem in ('age_unit_unknown', 'infant_age_month_zero', 'age_out_of_range'))
            as affects_results
    from deaths
    where record_problem is not null
),

birth_problems as (
    select
        'deis_births_microdata' as source,
        source_file,
        source_line,
        commune_code,
        birth_year as year,
        record_problem,
        'ANO_NAC=' || coalesce(year_as_read, 'blank')
            || ' MES_NAC=' || coalesce(cast(birth_month as varchar), '?')
            || ' DIA_NAC=' || coalesce(cast(birth_day as varchar), '?')
            || ' COMUNA=' || coalesce(commune_code_as_read, 'blank')
            || coalesce(' REG_RES=' || region_code, '') as observed_value,
        case
            when record_problem = 'year_outside_window'
                then 'year outside vars input_year_min..input_year_max: counted outside the build''s years'
            when not {{ deis_is_assignable('record_problem', 'birth_year') }}
                then 'birth not assigned to any commune-year: in no denominator (see the total row)'
            when record_problem = 'region_mismatch'
                then 'the region code disagrees with the region of the commune code: counted by the commune'
            else 'counted by ANO_NAC and commune; the date itself is not used'
        end as consequence,
        record_problem <> 'year_outside_window'
            and not {{ deis_is_assignable('record_problem', 'birth_year') }} as affects_results  -- noqa: LT01, LT06
    from births
    where record_problem is not null
),

problems as (
    select * from death_problems
    union all
    select * from birth_problems
),

problem_rows as (
    select
        source, source_file, source_line,
        source_file || ':' || cast(source_line as varchar) as record_key,
        commune_code, year, cast(null as varchar) as indicator, record_problem as check_name, observed_value,
        cast(1 as bigint) as records_affected, consequence, affects_results
    from problems
    -- A narrowed window leaves out whole years of records: those are in the total row only.
    where record_problem <> 'year_outside_window'
),

problem_totals as (
    select
        source, cast(null as varchar) as source_file, cast(null as bigint) as source_line,
        'all records' as record_key, cast(null as varchar) as commune_code, cast(null as integer) as year,
        cast(null as varchar) as indicator, record_problem as check_name,
        cast(count(*) as varchar) || ' records' as observed_value,
        count(*) as records_affected,
        'total of the rows above for this check' as consequence,
        max(case when affects_results then 1 else 0 end) = 1 as affects_results
    from problems
    group by source, record_problem
),

-- Historical codes mapped to current communes: one row per source, old code and year.
mapped_codes as (
    select 'deis_deaths_microdata' as source, commune_code_as_read, commune_code, year_of_death as year
    from deaths where commune_code_mapping = 'renumbered'
    union all
    select 'deis_births_microdata', commune_code_as_read, commune_code, birth_year
    from births where commune_code_mapping = 'renumbered'
),

mapping_rows as (
    select
        source, cast(null as varchar) as source_file, cast(null as bigint) as source_line,
        'code ' || commune_code_as_read || ' in ' || cast(year as varchar) as record_key,
        commune_code, year, cast(null as varchar) as indicator, 'commune_code_mapped' as check_name,
        cast(count(*) as varchar) || ' records with historical code ' || commune_code_as_read as observed_value,
        count(*) as records_affected,
        'counted under the current commune ' || commune_code || ' (seed commune_code_crosswalk)' as consequence,
        false as affects_results
    from mapped_codes
    group by source, commune_code_as_read, commune_code, year
),

-- Optional control totals (var deis_births_control_path): births counted per current region and
-- year against the control file; a difference is an audit row (the counts are not changed).
{% set control = [] %}
{% if execute and var('deis_births_control_path') %}
    {% set answer = fromjson(run_query("select imr_births_control(" ~ string_var('deis_births_control_path') ~ ")").columns[0].values()[0]) %}
    {% if answer.error %}
        {{ exceptions.raise_compiler_error(answer.error) }}
    {% endif %}
    {% do control.extend(answer.totals) %}
{% endif %}
control_totals as (
    {%- for row in control %}
    select {{ sql_string(row.region) }} as region_code, cast({{ row.year }} as integer) as year,
        cast({{ row.births }} as bigint) as control_births
    {{ "union all" if not loop.last }}
    {%- endfor %}
    {%- if not control %}
    select cast(null as varchar) as region_code, cast(null as integer) as year, cast(null as bigint) as control_births
    where false
    {%- endif %}
),

counted_by_region as (
    select communes.region_code, births.birth_year as year, count(*) as counted_births
    from births
    inner join {{ ref('stg_reference__communes') }} as communes on births.commune_code = communes.commune_code
    where {{ deis_is_assignable('births.record_problem', 'births.birth_year') }}
    group by communes.region_code, births.birth_year
),

control_rows as (
    select
        'deis_births_microdata' as source, cast(null as varchar) as source_file, cast(null as bigint) as source_line,
        'region=' || control_totals.region_code || ' year=' || cast(control_totals.year as varchar) as record_key,
        cast(null as varchar) as commune_code, control_totals.year, cast(null as varchar) as indicator,
        'births_control_difference' as check_name,
        'control ' || cast(control_totals.control_births as varchar) || ', counted '
            || cast(coalesce(counted_by_region.counted_births, 0) as varchar) as observed_value,
        abs(control_totals.control_births - coalesce(counted_by_region.counted_births, 0)) as records_affected,
        'births counted from the per-year bases differ from the control total for the region (current regions); '
            || 'the counts are not changed' as consequence,
        false as affects_results
    from control_totals
    left join counted_by_region
        on control_totals.region_code = counted_by_region.region_code and control_totals.year = counted_by_region.year
    -- Only years the bases cover: a control file usually spans more years.
    where control_totals.year in (select distinct birth_year from births)
        and control_totals.control_births <> coalesce(counted_by_region.counted_births, 0)
),

-- Causes of infant deaths (docs/methods/causes.md), one row per file, commune and year: deaths
-- with a blank (cause_unknown) or unusable (cause_invalid) DIAG1, counted in imr and in no
-- cause group; injury deaths without an external cause in DIAG2 (read on the reducible-causes
-- list by their DIAG1, where no injury code is listed); and each ICD-9 year, whose cause groups
-- come from the ICD-9 chapters and which no reducible-causes period may include.
infant_causes as not materialized (
    select * from {{ ref('int_deis__infant_deaths') }}
),

cause_checks as (
    select source_file, commune_code, year, cause_status as check_name, diag1 as code_as_read
    from infant_causes
    where cause_status <> 'coded'
    union all
    select source_file, commune_code, year, 'cause_external_code_missing', diag2
    from infant_causes
    where cause_chapter = 'XIX' and icd_revision = 10 and reducible_list_code = diag1
),

cause_rows as (
    select
        'deis_deaths_microdata' as source, source_file, cast(null as bigint) as source_line,
        'commune ' || commune_code || ' in ' || cast(year as varchar) as record_key,
        commune_code, year, cast(null as varchar) as indicator, check_name,
        cast(count(*) as varchar) || ' infant death(s); '
            || case when check_name = 'cause_external_code_missing' then 'DIAG2' else 'DIAG1' end || ' as read: '
            || string_agg(distinct coalesce(code_as_read, 'blank'), ', ' order by coalesce(code_as_read, 'blank'))
            as observed_value,
        count(*) as records_affected,
        case check_name
            when 'cause_unknown' then 'DIAG1 blank: counted in imr, in no cause group and not in the reducible share'
            when 'cause_invalid' then 'DIAG1 not a code of the year''s ICD revision, or in no chapter: '
                || 'counted in imr, in no cause group and not in the reducible share'
            else 'an injury death (DIAG1 S00-T98) without an external cause (V01-Y98) in DIAG2: '
                || 'in imr_external; not clearly avoidable on the reducible-causes list'
        end as consequence,
        true as affects_results
    from cause_checks
    group by source_file, commune_code, year, check_name
),

cause_totals as (
    select
        'deis_deaths_microdata' as source, cast(null as varchar) as source_file, cast(null as bigint) as source_line,
        'all records' as record_key, cast(null as varchar) as commune_code, cast(null as integer) as year,
        cast(null as varchar) as indicator, check_name,
        cast(count(*) as varchar) || ' infant deaths' as observed_value,
        count(*) as records_affected,
        'total of the rows above for this check' as consequence,
        true as affects_results
    from cause_checks
    group by check_name
),

icd9_rows as (
    select
        'deis_deaths_microdata' as source, cast(null as varchar) as source_file, cast(null as bigint) as source_line,
        'year ' || cast(year as varchar) as record_key,
        cast(null as varchar) as commune_code, year, cast(null as varchar) as indicator,
        'cause_icd9_year' as check_name,
        cast(count(*) as varchar) || ' infant death(s) in a year coded in ICD-9' as observed_value,
        count(*) as records_affected,
        'cause groups mapped from the ICD-9 chapters (seed icd_cause_groups); the reducible-causes list is ICD-10: '
            || 'no fct_reducible_infant_deaths share for a period holding this year' as consequence,
        true as affects_results
    from infant_causes
    where icd_revision = 9
    group by year
),

-- Which source fed the births of each year (int_deis__file_years): the user's births files, or,
-- without any (var deis_births_path empty), the bundled births by commune 2001-2016.
births_source_rows as (
    select
        case when source_file = {{ sql_string(deis_births_bundle_file()) }} then 'deis_births_bundle'
            else 'deis_births_microdata' end as source,
        cast(null as varchar) as source_file, cast(null as bigint) as source_line,
        'births of ' || cast(year as varchar) as record_key,
        cast(null as varchar) as commune_code, year, cast(null as varchar) as indicator,
        'births_source' as check_name,
        source_file as observed_value,
        records as records_affected,
        case when source_file = {{ sql_string(deis_births_bundle_file()) }}
            then 'live births of the year from the bundled DEIS births by commune (no births file given): '
                || 'records_affected is the bundle''s births of the year in all regions, not records'
            else 'live births of the year counted from the records of this births file' end as consequence,
        false as affects_results
    -- One file per kind and year (int_deis__input_checks stops the build otherwise).
    from {{ ref('int_deis__file_years') }}
    where kind = 'births'
),

-- records_read = records_assigned + the records of the unassignable checks.
input_totals as (
    select
        'deis_deaths_microdata' as source,
        count(*) as records_read,
        sum(case when {{ deis_is_assignable('record_problem', 'year_of_death') }} then 1 else 0 end)
            as records_assigned
    from deaths
    union all
    select
        'deis_births_microdata',
        count(*),
        sum(case when {{ deis_is_assignable('record_problem', 'birth_year') }} then 1 else 0 end)
    from births
),

reconciliation as (
    {% for check_name, description in [
        ('records_read', 'every record of the input files'),
        ('records_assigned', 'records counted in a commune-year (births in the denominator, deaths by age class)')] %}
    select
        source, cast(null as varchar), cast(null as bigint),
        'all records', cast(null as varchar), cast(null as integer), cast(null as varchar),
        '{{ check_name }}',
        cast({{ check_name }} as varchar) || ' records',
        cast({{ check_name }} as bigint),
        '{{ description }}',
        false
    from input_totals
    {% if not loop.last %}union all{% endif %}
    {% endfor %}
)

select * from problem_rows
union all
select * from problem_totals
union all
select * from mapping_rows
union all
select * from control_rows
union all
select * from reconciliation
union all
select * from cause_rows
union all
select * from cause_totals
union all
select * from icd9_rows
union all
select * from births_source_rows
