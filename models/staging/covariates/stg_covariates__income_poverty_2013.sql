-- Income poverty 2013 (% of people), one row per line of the headerless file. Values stay as
-- published; a value that does not parse as a number is kept as text and audited
-- (int_audit__covariates), never guessed.
with source as (
    select * from {{ source('covariates', 'income_poverty_2013_rm') }}
),

numbered as (
    -- DuckDB keeps file order (preserve_insertion_order), so this is the line number.
    select *, row_number() over () as source_line from source
)

select
    lpad(trim(commune_code), 5, '0') as commune_code,
    trim(value) as value_text,
    try_cast(trim(value) as double) as value,
    regexp_extract(filename, '[^/\\]+$') as source_file,
    source_line
from numbered
