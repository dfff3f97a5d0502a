-- Microdata mode: the checks that stop the build rather than publish a wrong number (issue 18).
-- Each check's rows are failures; error() raises with the first one, naming file and line.
--   1. Every line of every file became a record: records staged = lines - header - blank lines,
--      per file (Python counted the lines; a mismatch means DuckDB merged or split lines).
--   2. Malformed years, commune codes and ages (var deis_malformed_records = stop, the default).
--   3. Two files of one kind hold records of the same year (a copy, overlapping extracts such
--      as the official 1990-2019 deaths file and a per-year one): int_deis__file_years.
-- With no failure the model is one row per input file with its counts (read by audit_input_files).
{%- set policy = checked_var('deis_malformed_records') %}

with expected as (
    {%- set rows = [] -%}
    {%- if execute -%}
        {%- for kind in ['deaths', 'births'] -%}
            {%- for file in deis_inspect(kind).files -%}
                {%- do rows.append((kind, file)) -%}
            {%- endfor -%}
        {%- endfor -%}
    {%- endif %}
    {%- for kind, file in rows %}
    select {{ sql_string(kind) }} as kind, {{ sql_string(file.source_file) }} as source_file,
        {{ sql_string(file.layout) }} as layout, cast({{ file.records_expected }} as bigint) as records_expected,
        cast({{ file.lines }} as bigint) as lines, cast({{ file.blank_lines | length }} as bigint) as blank_lines
    {{ "union all" if not loop.last }}
    {%- endfor %}
    {%- if not rows %}
    select cast(null as varchar) as kind, cast(null as varchar) as source_file, cast(null as varchar) as layout,
        cast(null as bigint) as records_expected, cast(null as bigint) as lines, cast(null as bigint) as blank_lines
    where false
    {%- endif %}
),

-- Not materialized: each use scans only the columns it needs of the staging table, instead of
-- DuckDB copying every column of every record once to share it (a third of this model's time).
deaths as not materialized (
    select * from {{ ref('stg_deis__deaths') }}
),

births as not materialized (
    select * from {{ ref('stg_deis__births') }}
),

staged as (
    select 'deaths' as kind, source_file, count(*) as records_staged from deaths group by source_file
    union all
    select 'births', source_file, count(*) from births group by source_file
),

files as (
    select expected.*, coalesce(staged.records_staged, 0) as records_staged
    from expected
    left join staged on expected.kind = staged.kind and expected.source_file = staged.source_file
),

line_count_failures as (
    select 'DEIS ' || kind || ' input: ' || source_file || ' has ' || records_expected
        || ' record lines (' || lines || ' lines, header and ' || blank_lines || ' blank) but '
        || records_staged || ' records were read; the file is not in a DEIS layout DuckDB can read line by line'
        as message
    from files
    where records_staged <> records_expected
),

malformed as (
    select 'deaths' as kind, source_file, source_line, record_problem,
        'ANO_DEF=' || coalesce(year_as_read, '') || ' EDAD_TIPO=' || coalesce(age_unit_as_read, '')
        || ' EDAD_CANT=' || coalesce(age_amount_as_read, '') || ' COMUNA=' || coalesce(commune_code_as_read, '') as observed
    from deaths
    where record_problem in {{ deis_malformed_problems() }}
    union all
    select 'births', source_file, source_line, record_problem,
        'ANO_NAC=' || coalesce(year_as_read, '') || ' COMUNA=' || coalesce(commune_code_as_read, '')
    from births
    where record_problem in {{ deis_malformed_problems() }}
),

malformed_failures as (
    {% if policy == 'stop' %}
    select 'DEIS ' || kind || ' input: ' || source_file || ' line ' || source_line || ': ' || record_problem
        || ' (' || observed || '); ' || (select count(*) from malformed) || ' malformed record(s) in all. '
        || 'A malformed year, commune code or age is never cast or guessed: correct the file, or build with '
        || '--vars ''{deis_malformed_records: audit}'' to leave such records out of every count (audited)' as message
    from malformed
    order by kind, source_file, source_line
    limit 1
    {% else %}
    select cast(null as varchar) as message where false
    {% endif %}
),

file_years as (
    select * from {{ ref('int_deis__file_years') }}
),

overlap_failures as (
    select 'DEIS ' || kind || ' input: year ' || year || ' is in ' || count(*) || ' files ('
        || string_agg(source_file || ' line ' || first_line, ', ' order by source_file)
        || '); each year must come from one ' || kind || ' file, or its ' || kind
        || ' would be counted twice: remove that year from all but one file (or the file from deis_'
        || kind || '_path)' as message
    from file_years
    group by kind, year
    having count(*) > 1
),

-- priority: which failure is reported first when there are several (a UNION ALL has no order).
failures as (
    select 1 as priority, message from line_count_failures
    union all
    select 2, message from malformed_failures
    union all
    select * from (select 3, message from overlap_failures order by message limit 1) as first_overlap
)

select kind, source_file, layout, records_expected, lines, blank_lines, records_staged
from files
-- error() raises with the first failure; with none, every file's row is kept.
where (select count(error(message)) from (select message from failures order by priority, message limit 1) as first_failure) = 0
