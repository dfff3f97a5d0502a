-- Ranks are exactly 1..n (n = communes of the region) for every period and indicator.
select region_code, indicator, period_start, period_end,
    min(rank_in_region) as lowest, max(rank_in_region) as highest, count(*) as communes,
    count(distinct rank_in_region) as distinct_ranks
from {{ ref('fct_commune_vs_region') }}
group by region_code, indicator, period_start, period_end
having min(rank_in_region) <> 1 or max(rank_in_region) <> count(*) or count(distinct rank_in_region) <> count(*)
