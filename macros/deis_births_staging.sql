{#- The staging of the DEIS births in shard `shard` of `shards` of the files (deis_shard_files):
    one row per record of the births base(s), nothing dropped. Counting needs only the year of
    birth and the mother's commune of residence; names and region come from the commune
    reference. Only the fields the warehouse uses are parsed and kept (year, month and day,
    commune, region); the others (sex, weight, length, weeks, the mother's age, the commune's
    name) are checked only as part of their line (column count, encoding) and not stored:
    parsing and storing them was a third of the staging's time at 61 million records, for
    columns no model read. Per-year bases carry the codes in force in their year, mapped to
    current codes by the crosswalk seed. record_problem says why a record cannot be counted in a commune-year, or
    what else is wrong with it (region disagreeing with the commune, impossible date).
    The models stg_deis__births_shard_N call it; stg_deis__births is their union. -#}
{% macro deis_births_staging(shard, shards) -%}
    with records as (
        {{ deis_read('births', ['ano_nac', 'mes_nac', 'dia_nac', 'comuna', 'region'], shard, shards) }}
    ),

    typed as (
        select
            source_file,
            source_line,
            source_layout,
            {{ deis_year('ano_nac') }} as birth_year,
            trim(ano_nac) as year_as_read,
            {{ deis_year_problem('ano_nac') }} as year_problem,
            {{ deis_whole_number('mes_nac') }} as birth_month,
            {{ deis_whole_number('dia_nac') }} as birth_day,
            -- Month and day are checked only when the file has them.
            contains(source_columns, 'MES_NAC') and contains(source_columns, 'DIA_NAC') as has_date,
            {{ commune_code_or_text('comuna') }} as commune_code_as_read,
            lpad({{ deis_whole_number('region') }}::varchar, 2, '0') as region_code
        from records
    ),

    mapped as (
        select
            typed.*,
            coalesce(crosswalk.new_code, typed.commune_code_as_read) as commune_code,
            crosswalk.mapping as commune_code_mapping,
            -- NULL for an impossible date (30 February, month 13); try() is half the cost of casting text.
            try(make_date(typed.birth_year, typed.birth_month, typed.birth_day)) as birth_date
        from typed
        {{ deis_crosswalk_join('crosswalk', 'typed.commune_code_as_read', 'typed.birth_year', 'typed.source_layout') }}
    ),

    checked as (
        select
            *,
            {{ deis_commune_problem('commune_code_as_read', 'commune_code_mapping', 'commune_code') }} as commune_problem
        from mapped
    )

    select
        source_file,
        source_line,
        source_layout,
        birth_year,
        year_as_read,
        birth_month,
        birth_day,
        commune_code_as_read,
        {{ deis_usable_commune_code('commune_problem', 'commune_code') }} as commune_code,
        commune_code_mapping,
        region_code,
        coalesce(
            year_problem,
            commune_problem,
            -- The region of a code as read is its first two digits (CUT), also for a historical code.
            case when region_code is not null and region_code <> left(commune_code_as_read, 2) then 'region_mismatch' end,
            case when has_date and birth_date is null then 'unparseable_date' end
        ) as record_problem
    from checked
{%- endmacro %}
