-- The stratifiers of the inequality marts with their labels (seed `stratifiers`), so readers
-- label them from the warehouse instead of keeping their own list.
select
    stratifier,
    label_en,
    label_es,
    unit,
    cast(reference_year as integer) as reference_year,
    coverage,
    source_file
from {{ ref('stratifiers') }}
