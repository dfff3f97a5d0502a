-- The indicators, from the seed `indicators` (the one list of indicator codes), with whether
-- this build has counts for each. Every indicator the counts carry is joined in, so an
-- indicator missing from the seed shows up here, and this model's tests stop the build on it
-- (every mart takes its indicators from int_commune_year_counts).
with seed as (
    select * from {{ ref('indicators') }}
),

counted as (
    select distinct indicator from {{ ref('int_commune_year_counts') }}
)

select
    coalesce(seed.indicator, counted.indicator) as indicator,
    seed.sort_order,
    seed.name_es,
    seed.name_en,
    seed.abbreviation_es,
    seed.abbreviation_en,
    seed.age_start,
    seed.age_start_unit,
    seed.age_end,
    seed.age_end_unit,
    seed.ages_es,
    seed.ages_en,
    seed.multiplier,
    seed.numerator,
    seed.denominator,
    seed.in_aggregates,
    counted.indicator is not null as has_counts
from seed
full outer join counted on seed.indicator = counted.indicator
