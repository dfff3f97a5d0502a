-- Bundled-data mode's counts in the shape int_commune_year_counts reads (one row per commune,
-- year and indicator). The aggregate files have one row per commune-year, so a commune-year
-- absent here is missing data (int_commune_year_counts audits it), not a zero.
with counts as (
    select * from {{ ref('int_ine__commune_year_counts') }}
)

select
    commune_code,
    commune_name,
    year,
    'imr' as indicator,
    cast(infant_deaths_derived as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    -- Why the input gives no count (missing, unparseable, blocked lines): int_ine__commune_year_counts.
    input_problem as source_problem,
    'derived: INE deaths all ages - DEIS deaths aged 1+' as count_basis
from counts
