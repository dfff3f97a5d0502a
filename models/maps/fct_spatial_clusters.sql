-- Local Moran's I clusters of the EB-standardised commune rates per indicator and period
-- (computed by int_spatial_clusters; docs/methods/maps.md, "BYM2 smoothing and spatial clusters").
with clusters as (
    select * from {{ ref('int_spatial_clusters') }}
),

periods as (
    select * from {{ ref('int_analysis_periods') }}
)

select
    cast(clusters.commune_code as varchar) as commune_code,
    cast(clusters.commune_name as varchar) as commune_name,
    cast(clusters.region_code as varchar) as region_code,
    cast(clusters.indicator as varchar) as indicator,
    cast(clusters.period_start as integer) as period_start,
    cast(clusters.period_end as integer) as period_end,
    periods.period_label,
    cast(clusters.deaths as bigint) as deaths,
    cast(clusters.live_births as bigint) as live_births,
    cast(clusters.eb_standardised_rate as double) as eb_standardised_rate,
    cast(clusters.local_moran_i as double) as local_moran_i,
    cast(clusters.p_value as double) as p_value,
    cast(clusters.q_value as double) as q_value,
    cast(clusters.cluster_type as varchar) as cluster_type,
    cast(clusters.note as varchar) as note
from clusters
left join periods
    on clusters.period_start = periods.period_start
    and clusters.period_end = periods.period_end
