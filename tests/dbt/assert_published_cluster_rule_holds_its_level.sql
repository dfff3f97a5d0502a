-- The cluster types of fct_spatial_clusters: with no spatial structure, on the build's own births
-- and neighbours, the published rule calls any commune of a map (the country's, or a region's) a
-- cluster in at most var cluster_fdr_alpha of the simulated maps (within 2 Monte Carlo standard
-- errors), in every period of fct_cluster_calibration. Returns the cells where it does not, the
-- rows simulated with other settings than this build's (rerun `make calibrate-clusters` after
-- changing cluster_fdr_alpha or cluster_permutations), and a row when there is no calibration.
with published as (
    select * from {{ ref('fct_cluster_calibration') }}
    where rule = 'published' and scenario = 'no_structure'
)

select area, period_label, familywise_rate, familywise_mc_se, nominal_level, permutations
from published
where not holds_level
    or nominal_level <> {{ number_var('cluster_fdr_alpha') }}
    or permutations <> {{ number_var('cluster_permutations') }}
union all
select 'no calibration row for the published rule', null, null, null, null, null
where not exists (select 1 from published)
