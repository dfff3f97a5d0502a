-- The stratifiers of the inequality marts with their labels (seed `stratifiers`), so readers
-- label them from the warehouse instead of keeping their own list.
select
    stratifier,
    label_en,
    label_es,
    unit,
    cast(reference_year as integer) as reference_year,
    coverage,
    source_file,
    higher_is_more_deprived,
    cast(value_min as double) as value_min,
    cast(value_max as double) as value_max
from {{ ref('stratifiers') }}
