-- Contiguity is symmetric: every pair appears in both directions with the same gap.
select forward.commune_code, forward.neighbour_code, forward.gap_m, backward.gap_m as gap_back
from {{ ref('dim_commune_neighbours') }} as forward
left join {{ ref('dim_commune_neighbours') }} as backward
    on backward.commune_code = forward.neighbour_code and backward.neighbour_code = forward.commune_code
where backward.commune_code is null or backward.gap_m <> forward.gap_m
