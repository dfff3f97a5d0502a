-- One row per commune of Chile (all 346), with its province, region and a label point inside
-- its polygon (seed commune_boundaries; Antártica, without a polygon, has none).
with communes as (
    select * from {{ ref('stg_reference__communes') }}
),

boundaries as (
    select commune_code, label_latitude, label_longitude from {{ ref('commune_boundaries') }}
)

select
    communes.commune_code,
    communes.commune_name,
    communes.province_name,
    communes.region_code,
    communes.region_name,
    boundaries.label_latitude as latitude,
    boundaries.label_longitude as longitude
from communes
left join boundaries using (commune_code)
