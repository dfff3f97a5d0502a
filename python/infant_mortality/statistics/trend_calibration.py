"""How often each published trend rule calls a series increasing or decreasing, measured by
simulation on the build's own births (`make calibrate`, mart `fct_trend_calibration`).

Every area keeps its real yearly live births; its deaths are drawn at its own pooled rate,
constant (no trend) or changing by a fixed percent a year, with Poisson variation or more; the
warehouse's own rule (:func:`infant_mortality.statistics.trends.fit_trends`, every method, the
build's settings) then classes the simulated series exactly as it classes the real ones. The
share of series classed is the rule's error rate under no trend and its power under a trend,
by method, period length and expected deaths (docs/methods/trends.md, "Trend calibration").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from infant_mortality.statistics.trends import MART_METHODS, fit_trends


@dataclass(frozen=True)
class Scenario:
    """A way of drawing deaths: the yearly change of the rate, and the variation around it."""

    name: str
    yearly_change: float  # -0.08 = the rate falls 8% a year; 0 = no trend
    noise: str  # poisson | gamma_poisson (dispersion `dispersion`) | year_shocks (lognormal, sd `shock_sd`)
    description: str
    dispersion: float = 1.0
    shock_sd: float = 0.0

    @property
    def is_null(self) -> bool:
        return self.yearly_change == 0

    @property
    def event(self) -> str:
        """What counts as 'classed': any increase or decrease under no trend (an error), the
        trend's own direction otherwise (a detection)."""
        if self.is_null:
            return "increasing_or_decreasing"
        return "decreasing" if self.yearly_change < 0 else "increasing"


SCENARIOS = (
    Scenario("no_trend", 0.0, "poisson", "No trend: Poisson deaths at the area's pooled rate"),
    Scenario("no_trend_overdispersed", 0.0, "gamma_poisson",
             "No trend, extra-Poisson variation: gamma-Poisson deaths with variance 2 x mean",
             dispersion=2.0),
    Scenario("no_trend_year_shocks", 0.0, "year_shocks",
             "No trend, year-to-year variation of the rate itself: lognormal shocks, sd 0.1 on the log rate",
             shock_sd=0.1),
    Scenario("fall_3", -0.03, "poisson", "The rate falls 3% a year, Poisson deaths"),
    Scenario("fall_5", -0.05, "poisson", "The rate falls 5% a year, Poisson deaths"),
    Scenario("fall_8", -0.08, "poisson", "The rate falls 8% a year, Poisson deaths"),
    Scenario("rise_5", 0.05, "poisson", "The rate rises 5% a year, Poisson deaths"),
)
SCENARIO_BY_NAME = {s.name: s for s in SCENARIOS}

# Bands of the deaths a series is expected to have over its period (the scenario's mean):
# (label, lower bound inclusive). Below 20 the default trend_min_deaths leaves nothing to class.
DEATHS_BANDS = (("<20", 0), ("20-49", 20), ("50-99", 50), ("100-299", 100), ("300-999", 300), ("1000+", 1000))
ALL = "all"

CALIBRATION_COLUMNS = [
    "method", "scenario", "scenario_description", "yearly_change", "event", "period_years", "deaths_band", "n_series", "n_replicates",
    "n_simulated", "n_classed", "n_not_confirmed", "rate", "mc_se", "rate_ci95_lower",
    "rate_ci95_upper", "nominal_size", "holds_size", "best_test_power",
]


def deaths_band(expected_deaths: np.ndarray) -> np.ndarray:
    """The band label of each expected number of deaths; a bound belongs to the band above it.

    Under no trend a window that holds all of an area's years expects exactly its observed
    deaths, a whole number that is often a bound (100): summed in floating point it came out
    99.99999999999999 or 100.00000000000001 by the order of the rows, and the series changed
    band between two runs on the same data. Rounded to 1e-6 deaths first, it does not."""
    bounds = np.array([lower for _, lower in DEATHS_BANDS[1:]], dtype=float)
    labels = np.array([label for label, _ in DEATHS_BANDS], dtype=object)
    expected = np.round(np.asarray(expected_deaths, dtype=float), 6)
    return labels[np.searchsorted(bounds, expected, side="right")]


def expected_deaths(births: pd.DataFrame, scenario: Scenario) -> pd.DataFrame:
    """Per area-year, the scenario's mean deaths: live births x the area's pooled rate x
    (1 + yearly_change)^(year - the area's middle year).

    ``births``: area_level, area_code, year, deaths, live_births (years with births > 0)."""
    keys = ["area_level", "area_code"]
    pooled = births.groupby(keys)[["deaths", "live_births"]].transform("sum")
    middle = births.groupby(keys)["year"].transform(lambda y: (y.min() + y.max()) / 2)
    base_rate = pooled["deaths"] / pooled["live_births"]
    factor = (1.0 + scenario.yearly_change) ** (births["year"] - middle)
    return births.assign(mean_deaths=births["live_births"] * base_rate * factor)


def draw_deaths(mean: np.ndarray, scenario: Scenario, rng: np.random.Generator) -> np.ndarray:
    """One draw of yearly deaths around ``mean`` with the scenario's variation."""
    mean = np.asarray(mean, dtype=float)
    if scenario.noise == "poisson":
        return rng.poisson(mean)
    if scenario.noise == "gamma_poisson":
        # lambda ~ Gamma(shape = mean / (phi - 1), scale = phi - 1): mean `mean`, variance
        # (phi - 1) mean, so deaths have variance phi x mean.
        k = scenario.dispersion - 1.0
        lam = np.where(mean > 0, rng.gamma(np.where(mean > 0, mean / k, 1.0), k), 0.0)
        return rng.poisson(lam)
    if scenario.noise == "year_shocks":
        sd = scenario.shock_sd
        return rng.poisson(mean * np.exp(rng.normal(-sd * sd / 2, sd, mean.shape)))
    raise ValueError(f"unknown noise {scenario.noise!r} in scenario {scenario.name!r}")


def best_test_power(mean_deaths: np.ndarray, year: np.ndarray, yearly_change: float, alpha: float = 0.05) -> float:
    """Power of the best possible two-sided test of a log-linear trend in a Poisson series whose
    yearly means are known up to the trend (the Wald test with the true Fisher information
    I = sum mu_t (t - t_bar)^2, t_bar the mu-weighted mean year): no test at level alpha can
    beat it by much, so it says how much of the gap to 100% is the data's, not the rule's."""
    mu, t = np.asarray(mean_deaths, dtype=float), np.asarray(year, dtype=float)
    if mu.sum() <= 0 or yearly_change == 0:
        return float("nan")
    t_bar = (mu * t).sum() / mu.sum()
    shift = abs(np.log1p(yearly_change)) * np.sqrt((mu * (t - t_bar) ** 2).sum())
    z = stats.norm.ppf(1 - alpha / 2)
    return float(stats.norm.sf(z - shift) + stats.norm.cdf(-z - shift))


def _window_summary(window: pd.DataFrame, yearly_change: float) -> pd.Series:
    return pd.Series({"expected_deaths": window["mean_deaths"].sum(),
                      "best_test_power": best_test_power(window["mean_deaths"], window["year"], yearly_change)})


def simulate_classes(
    births: pd.DataFrame,
    periods: pd.DataFrame,
    settings: dict,
    scenario: Scenario,
    replicates: int,
    rng: np.random.Generator,
    *,
    batch: int = 25,
    progress: Callable[[str], None] | None = None,
    fit: Callable[..., pd.DataFrame] = fit_trends,
) -> pd.DataFrame:
    """Classes the published rule gives ``replicates`` simulated copies of every series: one row
    per method, area, period and replicate with its ``trend``, ``period_years`` and
    ``expected_deaths`` over the period. ``fit`` is the rule (``fit_trends``: the mart's; a test
    can hand in another to show what the harness catches)."""
    means = expected_deaths(births, scenario)
    window_means = []
    for p in periods.itertuples():
        inside = means[(means["year"] >= p.period_start) & (means["year"] <= p.period_end)]
        window_means.append(inside.groupby(["area_level", "area_code"])
                            .apply(_window_summary, scenario.yearly_change, include_groups=False)
                            .reset_index().assign(period_start=p.period_start, period_end=p.period_end))
    expected = pd.concat(window_means, ignore_index=True)

    out, done, started = [], 0, time.perf_counter()
    while done < replicates:
        k = min(batch, replicates - done)
        frames = []
        for rep in range(done, done + k):
            deaths = draw_deaths(means["mean_deaths"].to_numpy(), scenario, rng)
            frames.append(means.assign(
                area_code=means["area_code"] + "#" + str(rep), deaths=deaths,
                rate_per_1000=1000.0 * deaths / means["live_births"]))
        fitted = fit(pd.concat(frames, ignore_index=True), periods, **settings)
        out.append(fitted[["method", "area_level", "area_code", "period_start", "period_end", "n_years",
                           "n_deaths", "trend"]])
        done += k
        if progress:
            progress(f"{scenario.name}: {done}/{replicates} replicates ({time.perf_counter() - started:.0f} s)")
    classes = pd.concat(out, ignore_index=True)
    split = classes["area_code"].str.rsplit("#", n=1, expand=True)
    classes = classes.assign(area_code=split[0], replicate=split[1].astype(int))
    classes = classes.merge(expected, on=["area_level", "area_code", "period_start", "period_end"], how="left")
    return classes.assign(period_years=(classes["period_end"] - classes["period_start"] + 1).astype(int),
                          scenario=scenario.name)


def summarise(classes: pd.DataFrame, scenario: Scenario, p_threshold: float) -> pd.DataFrame:
    """The calibration rows of one scenario: per method, period length and deaths band (and over
    all lengths and bands), how many simulated series the rule classed as the scenario's event,
    the share with its Monte Carlo standard error and Wilson 95% interval, and under no trend
    whether the share is within the nominal size (at most p_threshold + 2 MC standard errors);
    under a trend, the mean power of the best possible test of the same series beside it."""
    if scenario.event == "increasing_or_decreasing":
        hit = classes["trend"].isin(["increasing", "decreasing"])
    else:
        hit = classes["trend"] == scenario.event
    frame = classes.assign(
        hit=hit, not_confirmed=classes["trend"] == "not_confirmed",
        deaths_band=deaths_band(classes["expected_deaths"]),
        period_years=classes["period_years"].astype(str))
    rows = []
    for length in [*sorted(frame["period_years"].unique(), key=int), ALL]:
        by_length = frame if length == ALL else frame[frame["period_years"] == length]
        for band in [*(label for label, _ in DEATHS_BANDS), ALL]:
            cell = by_length if band == ALL else by_length[by_length["deaths_band"] == band]
            for method, g in cell.groupby("method", sort=False):
                rows.append(_rate_row(method, length, band, g, scenario, p_threshold))
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS).dropna(subset=["rate"])


def _rate_row(method: str, length: str, band: str, g: pd.DataFrame, scenario: Scenario, alpha: float) -> dict:
    n, k = len(g), int(g["hit"].sum())
    rate = k / n if n else np.nan
    se = np.sqrt(rate * (1 - rate) / n) if n else np.nan
    lower, upper = wilson_interval(k, n)
    return {
        "method": method, "scenario": scenario.name, "scenario_description": scenario.description,
        "yearly_change": scenario.yearly_change, "event": scenario.event, "period_years": length,
        "deaths_band": band, "n_series": g.groupby(["area_level", "area_code", "period_start"]).ngroups,
        "n_replicates": int(g["replicate"].nunique()), "n_simulated": n, "n_classed": k,
        "n_not_confirmed": int(g["not_confirmed"].sum()), "rate": rate, "mc_se": se,
        "rate_ci95_lower": lower, "rate_ci95_upper": upper,
        "nominal_size": alpha if scenario.is_null else None,
        "holds_size": bool(rate <= alpha + 2 * se) if scenario.is_null else None,
        "best_test_power": None if scenario.is_null else float(g["best_test_power"].mean()),
    }


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial share k / n."""
    if n == 0:
        return np.nan, np.nan
    z = stats.norm.ppf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # Exactly 0 (1) when nothing (everything) was classed: the formula leaves rounding dust there.
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def calibrate(
    births: pd.DataFrame,
    periods: pd.DataFrame,
    settings: dict,
    replicates: dict[str, int],
    seed: int,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The calibration table: every scenario of ``replicates`` (name -> number of replicates),
    each drawn from its own seeded stream (so one scenario's rows do not change when another's
    replicates do)."""
    parts = []
    for i, (name, n) in enumerate(replicates.items()):
        scenario = SCENARIO_BY_NAME[name]
        rng = np.random.default_rng([seed, i])
        classes = simulate_classes(births, periods, settings, scenario, n, rng, progress=progress)
        parts.append(summarise(classes, scenario, float(settings.get("p_threshold", 0.05))))
    table = pd.concat(parts, ignore_index=True)
    order = {m: i for i, m in enumerate(MART_METHODS)}
    return table.sort_values(["scenario", "method", "period_years", "deaths_band"],
                             key=lambda c: c.map(order) if c.name == "method" else c, ignore_index=True)
