-- The indicators, from the seed `indicators` (the one list of indicator codes), for readers.
select
    indicator,
    sort_order,
    name_es,
    name_en,
    abbreviation_es,
    abbreviation_en,
    age_start,
    age_start_unit,
    age_end,
    age_end_unit,
    ages_es,
    ages_en,
    multiplier,
    numerator,
    denominator,
    in_aggregates
from {{ ref('indicators') }}
