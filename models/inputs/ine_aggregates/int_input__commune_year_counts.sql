-- Bundled-data mode's counts in the shape int_commune_year_counts reads (one row per commune,
-- year and indicator). The aggregate files have one row per commune-year, so a commune-year
-- absent here is missing data (int_commune_year_counts audits it), not a zero.
-- The aggregates give one count, infant deaths (derived); the seed `indicators` says which
-- indicators read it (in_aggregates, count_column), as the microdata port does for its counts.
with counts as (
    select
        commune_code,
        commune_name,
        year,
        cast(live_births as bigint) as live_births,
        -- Why the input gives no count (missing, unparseable, blocked lines): int_ine__commune_year_counts.
        input_problem,
        cast(infant_deaths_derived as bigint) as infant_deaths
    from {{ ref('int_ine__commune_year_counts') }}
),

count_columns as (
    -- include nulls: a missing count is a row with null deaths (audited), never a dropped row.
    select *
    from counts
    unpivot include nulls (
        deaths for count_column in (columns(* exclude (commune_code, commune_name, year, live_births, input_problem)))
    )
)

select
    count_columns.commune_code,
    count_columns.commune_name,
    count_columns.year,
    seed.indicator,
    count_columns.deaths,
    count_columns.live_births,
    count_columns.input_problem as source_problem,
    -- Names the derivation and where its measured bias is published (docs/methods/comparisons.md, "Official anchors
    -- below the country: MINSAL").
    'derived: INE deaths all ages - DEIS deaths aged 1+; bias against MINSAL by region: fct_official_anchors' as count_basis
from count_columns
inner join {{ ref('indicators') }} as seed
    on seed.in_aggregates and count_columns.count_column = seed.count_column
