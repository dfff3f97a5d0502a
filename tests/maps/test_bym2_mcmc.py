"""BYM2's Laplace approximation against full MCMC of the same model on the RM and the country (issue 46).

The MCMC (PyMC's NUTS, benchmarks/bym2_mcmc.py) runs in its own environment, not the
warehouse's, and takes about half an hour here. So the suite checks the Laplace fit against a
stored MCMC result (tests/data/bym2/, with the counts and neighbours it was fitted to; the counts
are today's bundled RM), and a second test reruns the MCMC where its environment exists at
$IMR_MCMC_PYTHON or .venv-mcmc/bin/python (python3 -m venv .venv-mcmc &&
.venv-mcmc/bin/pip install pymc==5.28.5). The tolerances and the
figures measured are in docs/methods/maps.md, "BYM2 smoothing and spatial clusters".
"""

from __future__ import annotations

import json

import pytest

from conftest import REPO_ROOT
from infant_mortality.tools import validate_bym2

needs_mcmc = pytest.mark.skipif(not validate_bym2.mcmc_python().exists(),
                                reason="no MCMC environment (.venv-mcmc or $IMR_MCMC_PYTHON): see docs/methods/maps.md")

# In units of the MCMC posterior SD of each commune's rate. The MCMC's own error on a mean is
# 1/√ESS of it: 0.04 at the RM's smallest effective size (684 of 12,000 draws), so a tolerance of
# 0.02 SD would test the sampler, not the approximation. Measured: 0.078 (means), 0.094 and 0.164
# (interval ends), 0.024 (probabilities), φ 0.759 against 0.807 (docs/methods/maps.md, "BYM2 smoothing and spatial clusters").
MEAN_TOLERANCE_SD = 0.10
INTERVAL_END_TOLERANCE_SD = 0.20
PROBABILITY_TOLERANCE = 0.03
PHI_TOLERANCE = 0.06


REFERENCE = REPO_ROOT / "tests" / "data" / "bym2" / "rm_imr_2010_2019_mcmc.json"
# The country's 346 communes in one model (5 islands, several components), 4 chains x 3,000
# draws: no divergence, bulk ESS 1,733 (docs/methods/maps.md, "Checked against full MCMC").
COUNTRY_REFERENCE = REPO_ROOT / "tests" / "data" / "bym2" / "country_imr_2010_2019_mcmc.json"


def _assert_agreement(table, summary):
    assert summary["max_r_hat"] <= 1.01
    assert summary["max_abs_mean_diff_in_sd"] < MEAN_TOLERANCE_SD, table.sort_values("mean_diff_in_sd").to_string()
    assert summary["max_abs_lower_diff_in_sd"] < INTERVAL_END_TOLERANCE_SD
    assert summary["max_abs_upper_diff_in_sd"] < INTERVAL_END_TOLERANCE_SD
    assert summary["max_abs_prob_diff"] < PROBABILITY_TOLERANCE
    assert abs(summary["phi_laplace"] - summary["phi_mcmc"]) < PHI_TOLERANCE


def test_rm_laplace_fit_agrees_with_the_stored_mcmc_reference():
    reference = json.loads(REFERENCE.read_text())
    counts, edges = validate_bym2.reference_counts(reference)
    table, summary = validate_bym2.compare(counts, edges, mcmc=reference["mcmc"])
    _assert_agreement(table, summary)
    # The approximation is tight where MCMC is sure of itself: on average well inside the tolerance.
    assert summary["mean_abs_mean_diff_in_sd"] < MEAN_TOLERANCE_SD / 2


def test_country_laplace_fit_agrees_with_the_stored_mcmc_reference_islands_included():
    reference = json.loads(COUNTRY_REFERENCE.read_text())
    counts, edges = validate_bym2.reference_counts(reference)
    assert len(counts) == 346
    table, summary = validate_bym2.compare(counts, edges, mcmc=reference["mcmc"])
    assert summary["divergences"] == 0
    _assert_agreement(table, summary)
    assert summary["mean_abs_mean_diff_in_sd"] < MEAN_TOLERANCE_SD / 2
    # Isla de Pascua, Juan Fernández, Puqueldón, Guaitecas and Antártica: no land neighbour, the
    # unstructured part only; their means agree as well as any other commune's.
    islands = table[table["island"]]
    assert sorted(islands["commune_code"]) == ["05104", "05201", "10206", "11203", "12202"]
    assert islands["mean_diff_in_sd"].abs().max() < MEAN_TOLERANCE_SD


@pytest.mark.parametrize("reference_file, region", [(REFERENCE, "13"), (COUNTRY_REFERENCE, None)])
def test_the_stored_reference_is_the_bundled_data_of_today(bundled_warehouse, reference_file, region):
    reference = json.loads(reference_file.read_text())
    counts, edges = validate_bym2.load_counts(bundled_warehouse, region, "imr", (2010, 2019))
    stored, stored_edges = validate_bym2.reference_counts(reference)
    assert counts["commune_code"].tolist() == stored["commune_code"].tolist()
    assert counts["deaths"].tolist() == stored["deaths"].tolist()
    assert counts["live_births"].tolist() == stored["live_births"].tolist()
    assert edges == stored_edges


@needs_mcmc
def test_rm_posterior_means_and_intervals_agree_with_mcmc(bundled_warehouse):
    counts, edges = validate_bym2.load_counts(bundled_warehouse, "13", "imr", (2010, 2019))
    assert len(counts) == 52
    table, summary = validate_bym2.compare(counts, edges, draws=3000, chains=4)
    _assert_agreement(table, summary)
