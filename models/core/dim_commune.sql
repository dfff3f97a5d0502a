-- One row per commune of Chile (all 346), with its province, region and seat coordinates.
select
    commune_code,
    commune_name,
    province_name,
    region_code,
    region_name,
    latitude,
    longitude
from {{ ref('stg_reference__communes') }}
