-- How often the published cluster rule of fct_spatial_clusters calls a commune a cluster when
-- there is none, and finds a planted one, measured by simulation on the build's own births and
-- neighbours (`make calibrate-clusters` writes the seed;
-- python/infant_mortality/statistics/cluster_calibration.py). The mart publishes the seed under
-- a contract.
select
    indicator,
    scenario,
    scenario_description,
    relative_risk,
    period_start,
    period_end,
    cast(period_start as varchar) || '-' || cast(period_end as varchar) as period_label,
    rule,
    rule_description,
    area,
    event,
    n_communes,
    n_replicates,
    commune_rate,
    commune_mc_se,
    familywise_rate,
    familywise_mc_se,
    familywise_ci95_lower,
    familywise_ci95_upper,
    nominal_level,
    holds_level,
    permutations,
    planted_centre,
    births_source,
    random_seed
from {{ ref('cluster_calibration') }}
