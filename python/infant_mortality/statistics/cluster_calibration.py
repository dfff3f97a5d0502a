"""How often the published cluster rule calls a commune a cluster when there is none, measured by
simulation on the build's own births (`make calibrate-clusters`, mart `fct_cluster_calibration`).

Every commune keeps its real pooled live births of each analysis period and the real neighbour
graph; its deaths are drawn Poisson at a rate that has no spatial structure (the country's
pooled rate, or its region's), or with a planted cluster (a commune and its neighbours at a
multiple of it). The mart's own procedure
(:func:`infant_mortality.statistics.clusters.commune_clusters`: the Assunção-Reis standardised
rates, local Moran's I with its fixed-seed conditional permutations, Benjamini-Hochberg over the
country, the build's alpha and permutations) then types the simulated communes exactly as it
types the real ones. The share called is the rule's error rate per commune and per map (at least
one commune called), beside the unadjusted rule p <= alpha for contrast, and under the planted
cluster its power (docs/methods/maps.md, "Cluster calibration").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from infant_mortality.statistics.clusters import NO_NEIGHBOURS, NOT_SIGNIFICANT, commune_clusters
from infant_mortality.statistics.trend_calibration import wilson_interval

PERIOD = ["period_start", "period_end"]


@dataclass(frozen=True)
class Scenario:
    """A way of drawing deaths: the rate every commune has, and a planted group's relative risk."""

    name: str
    rate_level: str  # country | region: whose pooled rate every commune gets
    description: str
    relative_risk: float = 1.0  # of the planted group; 1 = nothing planted

    @property
    def is_null(self) -> bool:
        return self.relative_risk == 1.0


SCENARIOS = (
    Scenario("no_structure", "country",
             "No spatial structure: every commune's deaths Poisson at the country's pooled rate"),
    Scenario("region_rates", "region",
             "Regions differ, nothing within them: every commune's deaths Poisson at its region's pooled rate"),
    Scenario("planted_cluster", "country",
             "A planted cluster: a commune and its neighbours at 1.5 x the country's pooled rate, the rest at it",
             relative_risk=1.5),
)
SCENARIO_BY_NAME = {s.name: s for s in SCENARIOS}

# The published rule (the mart's cluster_type) and, for contrast, the same p-values unadjusted.
RULES = {
    "published": "The mart's: a type where the Benjamini-Hochberg q <= alpha over the country",
    "unadjusted": "For contrast: a type wherever the pseudo p <= alpha, no adjustment",
}
COUNTRY, PLANTED = "country", "planted group"
CLUSTER_TYPES = ("high-high", "low-low", "high-low", "low-high")

CALIBRATION_COLUMNS = [
    "scenario", "scenario_description", "relative_risk", "period_start", "period_end", "rule",
    "rule_description", "area", "event", "n_communes", "n_replicates", "commune_rate", "commune_mc_se",
    "familywise_rate", "familywise_mc_se", "familywise_ci95_lower", "familywise_ci95_upper",
    "nominal_level", "holds_level",
]


def planted_group(centre: str, neighbours: pd.DataFrame) -> set[str]:
    """The planted cluster: the centre commune and its neighbours (a connected group)."""
    around = neighbours.loc[neighbours["commune_code"] == centre, "neighbour_code"]
    if around.empty:
        raise ValueError(f"commune {centre!r} has no neighbours: it cannot centre a planted cluster")
    return {centre, *around}


def expected_deaths(pooled: pd.DataFrame, scenario: Scenario, planted: set[str]) -> pd.Series:
    """Each commune-period's mean deaths under the scenario: live births x the country's (or its
    region's) pooled rate of the period, times the relative risk inside the planted group. NaN
    where the commune has no rate (no births, counts unavailable): it stays out, as in the mart."""
    has_rate = pooled["deaths"].notna() & (pooled["live_births"] > 0)
    counted = pooled.where(has_rate)
    keys = PERIOD if scenario.rate_level == "country" else [*PERIOD, "region_code"]
    totals = counted.groupby([pooled[k] for k in keys])[["deaths", "live_births"]].transform("sum")
    rate = totals["deaths"] / totals["live_births"]
    risk = np.where(pooled["commune_code"].isin(planted), scenario.relative_risk, 1.0)
    return (counted["live_births"] * rate * risk).astype(float)


def simulate_calls(
    pooled: pd.DataFrame,
    neighbours: pd.DataFrame,
    scenario: Scenario,
    replicates: int,
    rng: np.random.Generator,
    alpha: float,
    permutations: int,
    *,
    planted: set[str] = frozenset(),
    progress: Callable[[str], None] | None = None,
    rule: Callable[..., pd.DataFrame] = commune_clusters,
) -> pd.DataFrame:
    """The types the rule gives ``replicates`` simulated copies of the pooled counts (one
    indicator, every period): one row per tested commune, period and replicate with its
    ``cluster_type``, ``p_value``, ``q_value``, whether it lies in the ``high_high`` quadrant and
    whether it is ``planted``. ``rule`` is the mart's (``commune_clusters``); a test can hand in
    another."""
    mean = expected_deaths(pooled, scenario, planted)
    simulated = mean.notna().to_numpy()
    out, started = [], time.perf_counter()
    for rep in range(replicates):
        deaths = pooled["deaths"].astype(float).to_numpy().copy()
        deaths[simulated] = rng.poisson(mean.to_numpy()[simulated])
        typed = rule(pooled.assign(deaths=deaths), neighbours, alpha, permutations)
        out.append(tested_rows(typed).assign(replicate=rep))
        if progress and (rep + 1) % 25 == 0:
            progress(f"{scenario.name}: {rep + 1}/{replicates} replicates ({time.perf_counter() - started:.0f} s)")
    calls = pd.concat(out, ignore_index=True)
    return calls.assign(planted=calls["commune_code"].isin(planted))


def tested_rows(typed: pd.DataFrame) -> pd.DataFrame:
    """The communes the rule tested (a q-value), with esda's high-high quadrant: the standardised
    rate above its mean over the period's communes with a rate (esda centres on that mean, islands
    included) and a positive local I (so the neighbours' mean is above it too)."""
    z = typed["eb_standardised_rate"].astype(float)
    centred = z - z.groupby([typed[k] for k in PERIOD]).transform("mean")
    tested = typed["q_value"].notna()
    high_high = (centred > 0) & (typed["local_moran_i"].astype(float) > 0)
    return (typed.assign(high_high=high_high)[tested]
            [["commune_code", "region_code", *PERIOD, "p_value", "q_value", "cluster_type", "high_high"]]
            .astype({"p_value": float, "q_value": float, "high_high": bool}))


def called(calls: pd.DataFrame, rule: str, alpha: float) -> pd.Series:
    """Whether each tested commune is called a cluster of any type by the rule."""
    if rule == "published":
        return calls["cluster_type"].isin(CLUSTER_TYPES)
    if rule == "unadjusted":
        return calls["p_value"] <= alpha
    raise ValueError(f"unknown rule {rule!r}")


def detected(calls: pd.DataFrame, rule: str, alpha: float) -> pd.Series:
    """Whether each tested commune is called high-high by the rule (a planted cluster found)."""
    return called(calls, rule, alpha) & calls["high_high"]


def summarise(calls: pd.DataFrame, scenario: Scenario, alpha: float) -> pd.DataFrame:
    """The calibration rows of one scenario: per period and rule, over the country and each
    region (under a planted cluster: the communes outside it), the share of commune tests called
    a cluster of any type and the share of maps with at least one called (the family-wise rate);
    under a planted cluster also the planted group's communes called high-high (the power)."""
    rows = []
    for (start, end), in_period in calls.groupby(PERIOD, sort=True):
        for rule in RULES:
            hit = called(in_period, rule, alpha)
            outside = ~in_period["planted"]
            rows.append(_rate_row(in_period[outside], hit[outside], scenario, rule, COUNTRY, alpha))
            for region, in_region in in_period[outside].groupby("region_code", sort=True):
                rows.append(_rate_row(in_region, hit[in_region.index], scenario, rule, region, alpha))
            if not scenario.is_null:
                inside = in_period[in_period["planted"]]
                rows.append(_rate_row(inside, detected(inside, rule, alpha), scenario, rule, PLANTED, alpha))
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)


def _rate_row(cell: pd.DataFrame, hit: pd.Series, scenario: Scenario, rule: str, area: str, alpha: float) -> dict:
    """One row: the per-commune and family-wise shares of a cell and their Monte Carlo errors.

    The communes of one replicate share its draw (and its BH threshold), so the per-commune
    share's standard error is taken across replicates (the spread of each replicate's share),
    not as if every commune-replicate were independent."""
    per_replicate = hit.groupby(cell["replicate"]).agg(["mean", "any"])
    n_replicates = len(per_replicate)
    commune_rate = float(hit.mean())
    commune_se = float(per_replicate["mean"].std(ddof=1) / np.sqrt(n_replicates)) if n_replicates > 1 else np.nan
    familywise_hits = int(per_replicate["any"].sum())
    familywise = familywise_hits / n_replicates
    familywise_se = float(np.sqrt(familywise * (1 - familywise) / n_replicates))
    lower, upper = wilson_interval(familywise_hits, n_replicates)
    error_event = scenario.is_null or area != PLANTED
    return {
        "scenario": scenario.name, "scenario_description": scenario.description,
        "relative_risk": scenario.relative_risk, "period_start": int(cell["period_start"].iloc[0]),
        "period_end": int(cell["period_end"].iloc[0]), "rule": rule, "rule_description": RULES[rule],
        "area": area, "event": "any type (an error)" if error_event else "high-high (a detection)",
        "n_communes": int(cell["commune_code"].nunique()), "n_replicates": n_replicates,
        "commune_rate": commune_rate, "commune_mc_se": commune_se,
        "familywise_rate": familywise, "familywise_mc_se": familywise_se,
        "familywise_ci95_lower": lower, "familywise_ci95_upper": upper,
        "nominal_level": alpha,
        "holds_level": holds_level(scenario, rule, commune_rate, commune_se, familywise, familywise_se, alpha),
    }


def holds_level(scenario: Scenario, rule: str, commune_rate: float, commune_se: float,
                familywise: float, familywise_se: float, alpha: float) -> bool | None:
    """Under no spatial structure, whether the rule keeps what it promises, within 2 Monte Carlo
    standard errors: the published rule (BH: under the complete null the chance of any false
    call on the map is at most alpha) its family-wise rate; the unadjusted rule (p <= alpha) its
    per-commune rate. Null in the other scenarios: regions that differ, or a planted cluster,
    are structure the rule may find."""
    if scenario.name != "no_structure":
        return None
    if rule == "published":
        return bool(familywise <= alpha + 2 * familywise_se)
    return bool(commune_rate <= alpha + 2 * commune_se)


def calibrate(
    pooled: pd.DataFrame,
    neighbours: pd.DataFrame,
    replicates: dict[str, int],
    seed: int,
    alpha: float,
    permutations: int,
    planted_centre: str,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The calibration table: every scenario of ``replicates`` (name -> replicates), each drawn
    from its own seeded stream (one scenario's rows do not change when another's count does)."""
    planted = planted_group(planted_centre, neighbours)
    parts = []
    for i, (name, n) in enumerate(replicates.items()):
        scenario = SCENARIO_BY_NAME[name]
        calls = simulate_calls(pooled, neighbours, scenario, n, np.random.default_rng([seed, i]), alpha,
                               permutations, planted=planted if not scenario.is_null else frozenset(),
                               progress=progress)
        parts.append(summarise(calls, scenario, alpha))
    return pd.concat(parts, ignore_index=True)
