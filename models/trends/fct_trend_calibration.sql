-- How often each published trend rule classes a series, measured by simulation on the build's
-- own births (`make calibrate` writes the seed; python/infant_mortality/statistics/trend_calibration.py).
-- The mart publishes the seed under a contract, in the column order readers know.
select
    indicator,
    method,
    scenario,
    scenario_description,
    yearly_change,
    event,
    period_years,
    deaths_band,
    cast(n_series as bigint) as n_series,
    cast(n_replicates as bigint) as n_replicates,
    cast(n_simulated as bigint) as n_simulated,
    cast(n_classed as bigint) as n_classed,
    cast(n_not_confirmed as bigint) as n_not_confirmed,
    rate,
    mc_se,
    rate_ci95_lower,
    rate_ci95_upper,
    nominal_size,
    holds_size,
    best_test_power,
    births_source,
    cast(random_seed as bigint) as random_seed
from {{ ref('trend_calibration') }}
