"""BYM2's Laplace approximation against full MCMC of the same model on the RM (issue 46).

The MCMC (PyMC's NUTS, benchmarks/bym2_mcmc.py) runs in its own environment, not the
warehouse's: the test is skipped unless it exists at $IMR_MCMC_PYTHON or .venv-mcmc/bin/python
(python3 -m venv .venv-mcmc && .venv-mcmc/bin/pip install pymc==5.28.5). The tolerances and the
figures measured are in docs/methods-bym2.md.
"""

from __future__ import annotations

import pytest

from infant_mortality.tools import validate_bym2

pytestmark = pytest.mark.skipif(not validate_bym2.mcmc_python().exists(),
                                reason="no MCMC environment (.venv-mcmc or $IMR_MCMC_PYTHON): see docs/methods-bym2.md")

# In units of the MCMC posterior SD of each commune's rate. The MCMC's own error on a mean is
# 1/√ESS of it: 0.04 at the RM's smallest effective size (684 of 12,000 draws), so a tolerance of
# 0.02 SD would test the sampler, not the approximation. Measured: 0.078 (means), 0.094 and 0.164
# (interval ends), 0.024 (probabilities), φ 0.759 against 0.807 (docs/methods-bym2.md).
MEAN_TOLERANCE_SD = 0.10
INTERVAL_END_TOLERANCE_SD = 0.20
PROBABILITY_TOLERANCE = 0.03
PHI_TOLERANCE = 0.06


def test_rm_posterior_means_and_intervals_agree_with_mcmc(bundled_warehouse):
    counts, edges = validate_bym2.load_counts(bundled_warehouse, "13", "imr", (2010, 2019))
    assert len(counts) == 52
    table, summary = validate_bym2.compare(counts, edges, draws=3000, chains=4)
    assert summary["max_r_hat"] <= 1.01
    assert summary["max_abs_mean_diff_in_sd"] < MEAN_TOLERANCE_SD, table.sort_values("mean_diff_in_sd").to_string()
    assert summary["max_abs_lower_diff_in_sd"] < INTERVAL_END_TOLERANCE_SD
    assert summary["max_abs_upper_diff_in_sd"] < INTERVAL_END_TOLERANCE_SD
    assert summary["max_abs_prob_diff"] < PROBABILITY_TOLERANCE
    assert abs(summary["phi_laplace"] - summary["phi_mcmc"]) < PHI_TOLERANCE
