-- Queen contiguity of the commune polygons, both directions of every pair (the seed
-- commune_neighbours, generated from the pinned polygons by infant_mortality.tools.generate_geography;
-- docs/methods/maps.md, "Neighbours"). Islands have no row.
select
    cast(commune_code as varchar) as commune_code,
    cast(neighbour_code as varchar) as neighbour_code,
    cast(gap_m as double) as gap_m
from {{ ref('commune_neighbours') }}
