-- Bundled-data mode: problems in the input files themselves, each with its file and line, and
-- facts about the inputs that are not count problems.

{% set consequences = {
    'blank_line': 'blank line: holds no value; ignored',
    'wrong_field_count': 'line does not have the 6 fields of the header: no value of it is used',
    'year_not_whole_number': 'year is not a whole number: the line is assigned to no year',
    'year_out_of_range': 'year no record can have (after the current year or before 1900: a typo): the line is assigned to no year',
    'commune_code_malformed': 'commune code is not 4 or 5 digits: the line is assigned to no commune (never cut or cast)',
    'event_unknown': 'evento is neither nacimiento nor defuncion: the line is not used',
    'sex_unknown': 'sex is not one the file may hold: the line is not used',
    'count_not_whole_number': 'count is not a whole number (never cast): this count is missing',
    'mean_age_not_a_number': 'mean age is not a number: the line is not used',
    'age_group_unknown': 'age group is not 1+, 18+ or 75+: the line is not used',
    'last_line_unterminated': 'last line has no newline after it (the file may be cut): its count is not used',
} %}

with parse_problems as (
    select 'ine_vital_statistics' as source, source_file, source_line, commune_code, year, parse_problem, raw_line
    from {{ ref('stg_ine__vital_statistics') }}
    where parse_problem is not null
    union all
    select 'deis_deaths_aggregated', source_file, source_line, commune_code, year, parse_problem, raw_line
    from {{ ref('stg_deis_aggregates__deaths_by_age_group') }}
    where parse_problem is not null
),

-- Lines of years outside the window (vars input_year_min, input_year_max; issue 41): counted
-- outside it, one row per file and year (a narrowed window leaves out whole years of lines).
outside_window_rows as (
    select
        source,
        source_file,
        min(source_line) as source_line,
        source_file || ' year=' || year_text as record_key,
        cast(null as varchar) as commune_code,
        cast(year_text as integer) as year,
        cast(null as varchar) as indicator,
        'year_outside_window' as check_name,
        cast(count(*) as varchar) || ' lines of year ' || year_text
        || ', the first on line ' || cast(min(source_line) as varchar) as observed_value,
        count(*) as records_affected,
        'outside the years of vars input_year_min..input_year_max ({{ input_year_min() }}-{{ input_year_max() }}): '
        || 'counted in no year of the build' as consequence,
        false as affects_results
    from (
        select *, trim(string_split(raw_line, ',')[case when source = 'ine_vital_statistics' then 1 else 2 end]) as year_text
        from parse_problems
        where parse_problem = 'year_outside_window'
    ) as outside
    group by source, source_file, year_text
),

parse_rows as (
    select
        source,
        source_file,
        source_line,
        source_file || ':' || cast(source_line as varchar) as record_key,
        commune_code,
        year,
        cast(null as varchar) as indicator,
        parse_problem as check_name,
        'line: ' || raw_line as observed_value,
        cast(1 as bigint) as records_affected,
        case parse_problem
            {%- for check, text in consequences.items() %}
            when {{ sql_string(check) }} then {{ sql_string(text) }}
            {%- endfor %}
        end as consequence,
        parse_problem <> 'blank_line' as affects_results
    from parse_problems
    where parse_problem <> 'year_outside_window'
),

-- The commune-years the build covers: those core's int_commune_year_counts holds, found from this
-- room's own port (a room reads no later room): every commune of a region counted, every year
-- from the first to the last counted (the completeness grid, macro commune_year_grid), and the
-- communes the reference does not know, within the scope.
counted as (
    select distinct counts.commune_code, counts.year, communes.commune_code is null as is_unknown_commune
    from {{ ref('int_input__commune_year_counts') }} as counts
    left join {{ ref('stg_reference__communes') }} as communes on counts.commune_code = communes.commune_code
),

covered as (
    select communes.commune_code, cast(series.year as integer) as year
    from {{ ref('stg_reference__communes') }} as communes
    cross join (select min(year) as first_year, max(year) as last_year from counted) as bounds
    cross join generate_series(bounds.first_year, bounds.last_year) as series (year)
    where communes.region_code in (
        select reference.region_code
        from counted
        inner join {{ ref('stg_reference__communes') }} as reference on counted.commune_code = reference.commune_code
    )
        and {{ in_scope('communes.region_code', 'series.year') }}
    union all
    select commune_code, year
    from counted
    where is_unknown_commune and {{ in_year_scope('year') }}
),

-- DEIS deaths aged 1+ whose commune of residence is unknown (99999) cannot be subtracted from
-- any commune's all-age deaths; reported per year so the size of the problem is visible.
unknown_commune_deaths as (
    select max(source_file) as source_file, year, sum(deaths) as deaths
    from {{ ref('stg_deis_aggregates__deaths_by_age_group') }}
    where commune_code = '99999' and age_group = '1+'
        and {{ in_year_scope('year') }}
        and year between (select min(year) from covered) and (select max(year) from covered)
    group by year
),

unknown_commune_rows as (
    select
        'deis_deaths_aggregated' as source,
        source_file,
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
),

-- DEIS lists no zero rows: a commune-year it does not list had no death aged 1+ (count zero).
not_listed_rows as (
    select
        'deis_deaths_aggregated' as source,
        cast(null as varchar) as source_file,
        cast(null as bigint) as source_line,
        'commune=' || commune_code || ' year=' || cast(year as varchar) as record_key,
        commune_code,
        year,
        cast(null as varchar) as indicator,
        'deis_commune_year_not_listed' as check_name,
        'deaths all ages=' || coalesce(cast(deaths_all_ages as varchar), 'missing') as observed_value,
        cast(0 as bigint) as records_affected,
        'no DEIS row: deaths aged 1+ counted as zero, so every INE death is an infant death' as consequence,
        false as affects_results
    from {{ ref('int_ine__commune_year_counts') }} as counts
    where is_missing_from_deis and input_problem is null
        and exists (
            select 1 from covered
            where covered.commune_code = counts.commune_code and covered.year = counts.year
        )
)

select * from parse_rows
union all
select * from outside_window_rows
union all
select * from unknown_commune_rows
union all
select * from not_listed_rows
