"""The BYM2 fit of the warehouse (Laplace approximation over a grid) against full MCMC of the same
model (PyMC's NUTS, ``benchmarks/bym2_mcmc.py``), on a region or the country; prints the figures
that docs/methods/maps.md, "BYM2 smoothing and spatial clusters" quotes.

    python -m infant_mortality.tools.validate_bym2 warehouse/infant_mortality.duckdb --region 13
    python -m infant_mortality.tools.validate_bym2 warehouse/infant_mortality.duckdb --region all

PyMC is not a dependency of the warehouse; the MCMC runs in its own environment, found at
``$IMR_MCMC_PYTHON`` or ``.venv-mcmc/bin/python``:

    python3 -m venv .venv-mcmc && .venv-mcmc/bin/pip install pymc==5.28.5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from infant_mortality.statistics import bym2

REPO_ROOT = Path(__file__).resolve().parents[3]
MCMC_SCRIPT = REPO_ROOT / "benchmarks" / "bym2_mcmc.py"


def mcmc_python() -> Path:
    """The interpreter of the MCMC environment (may not exist)."""
    return Path(os.environ.get("IMR_MCMC_PYTHON", REPO_ROOT / ".venv-mcmc" / "bin" / "python"))


def load_counts(warehouse: Path, region: str | None, indicator: str = "imr", period=(2010, 2019)):
    """The pooled counts (communes with live births) and the neighbour pairs (positions) among them."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        counts = con.execute(
            "select commune_code, commune_name, region_code, deaths, live_births, region_rate_per_1000 "
            "from marts.fct_commune_vs_region where indicator = ? and period_start = ? and period_end = ? "
            "and live_births > 0 order by commune_code", [indicator, *period]).df()
        pairs = con.execute("select commune_code, neighbour_code from marts.dim_commune_neighbours").fetchall()
    if region is not None:
        counts = counts[counts["region_code"] == region].reset_index(drop=True)
    position = {code: i for i, code in enumerate(counts["commune_code"])}
    edges = sorted({(position[a], position[b]) for a, b in pairs if a in position and b in position and a < b})
    return counts, edges


def run_mcmc(counts: pd.DataFrame, edges, draws: int, chains: int, seed: int = 46) -> dict:
    spec = {"deaths": counts["deaths"].astype(float).tolist(), "births": counts["live_births"].astype(float).tolist(),
            "edges": [list(e) for e in edges], "thresholds": (counts["region_rate_per_1000"] / 1000).tolist(),
            "draws": draws, "chains": chains, "seed": seed}
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run([str(mcmc_python()), str(MCMC_SCRIPT)], input=json.dumps(spec), capture_output=True,
                            text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"MCMC failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def compare(counts: pd.DataFrame, edges, draws: int = 5000, chains: int = 4,
            mcmc: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """Per commune: both fits' posterior mean, 2.5% and 97.5% quantiles and P(rate > region's), and
    the differences in units of the MCMC posterior SD; and a summary. `mcmc`: a stored MCMC result
    of the same counts (a reference file's "mcmc"), else the MCMC runs now."""
    graph = bym2.decompose(len(counts), edges)
    started = time.perf_counter()
    fit = bym2.fit_bym2(counts["deaths"], counts["live_births"], graph)
    thresholds = counts["region_rate_per_1000"].to_numpy(float) / 1000
    laplace = {"mean": fit.rate_mean(), "lower": fit.rate_quantile(0.025), "upper": fit.rate_quantile(0.975),
               "prob_exceeds": fit.prob_exceeds(thresholds)}
    laplace_seconds = time.perf_counter() - started
    started = time.perf_counter()
    if mcmc is None:
        mcmc = run_mcmc(counts, edges, draws, chains)
    mcmc_seconds = time.perf_counter() - started
    sd = np.asarray(mcmc["sd"])
    table = counts[["commune_code", "commune_name", "deaths", "live_births"]].copy()
    for name in ("mean", "lower", "upper", "prob_exceeds"):
        scale = 1.0 if name == "prob_exceeds" else 1000.0
        table[f"laplace_{name}"] = laplace[name] * scale
        table[f"mcmc_{name}"] = np.asarray(mcmc[name]) * scale
    for name in ("mean", "lower", "upper"):
        table[f"{name}_diff_in_sd"] = (laplace[name] - np.asarray(mcmc[name])) / sd
    table["island"] = graph.is_island
    summary = {
        "communes": len(counts), "islands": int(graph.is_island.sum()),
        "max_abs_mean_diff_in_sd": float(table["mean_diff_in_sd"].abs().max()),
        "mean_abs_mean_diff_in_sd": float(table["mean_diff_in_sd"].abs().mean()),
        "max_abs_lower_diff_in_sd": float(table["lower_diff_in_sd"].abs().max()),
        "max_abs_upper_diff_in_sd": float(table["upper_diff_in_sd"].abs().max()),
        "max_abs_prob_diff": float((table["laplace_prob_exceeds"] - table["mcmc_prob_exceeds"]).abs().max()),
        "mcse_of_mean_in_sd": float(1 / np.sqrt(mcmc["min_ess_bulk"])),
        "phi_laplace": fit.phi_mean, "phi_mcmc": mcmc["phi_mean"],
        "min_ess_bulk": mcmc["min_ess_bulk"], "max_r_hat": mcmc["max_r_hat"], "divergences": mcmc["divergences"],
        "draws": mcmc["draws"], "laplace_seconds": laplace_seconds, "mcmc_seconds": mcmc_seconds,
    }
    return table, summary


def reference_counts(reference: dict) -> tuple[pd.DataFrame, list[tuple[int, int]]]:
    """The counts and neighbour pairs a stored reference was fitted to."""
    counts = pd.DataFrame({key: reference[key] for key in ("commune_code", "deaths", "live_births",
                                                           "region_rate_per_1000")})
    counts["commune_name"] = counts["commune_code"]
    return counts, [tuple(edge) for edge in reference["edges"]]


def save_reference(path: Path, counts: pd.DataFrame, edges, mcmc: dict, about: str) -> None:
    """A stored MCMC result with the counts and neighbours it was fitted to, so a test can check the
    Laplace fit against it in a second, with no MCMC environment."""
    path.write_text(json.dumps({
        "about": about, "commune_code": counts["commune_code"].tolist(),
        "deaths": [int(x) for x in counts["deaths"]], "live_births": [int(x) for x in counts["live_births"]],
        "region_rate_per_1000": [float(x) for x in counts["region_rate_per_1000"]],
        "edges": [list(edge) for edge in edges], "mcmc": mcmc}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.tools.validate_bym2",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("warehouse", type=Path, help="a built warehouse (opened read-only)")
    parser.add_argument("--region", default="13", help="region code, or 'all' for the country (default 13)")
    parser.add_argument("--indicator", default="imr")
    parser.add_argument("--period", default="2010-2019", help="YYYY-YYYY (default 2010-2019)")
    parser.add_argument("--draws", type=int, default=5000, help="MCMC draws per chain (default 5000)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--save-reference", type=Path, metavar="JSON",
                        help="also write the MCMC result with its counts (tests/data/bym2/ holds the RM's)")
    args = parser.parse_args(argv)
    if not mcmc_python().exists():
        print(f"no MCMC environment at {mcmc_python()}: python3 -m venv .venv-mcmc && "
              ".venv-mcmc/bin/pip install pymc==5.28.5 (or set IMR_MCMC_PYTHON)", file=sys.stderr)
        return 2
    start, end = (int(y) for y in args.period.split("-"))
    counts, edges = load_counts(args.warehouse, None if args.region == "all" else args.region, args.indicator,
                                (start, end))
    mcmc = run_mcmc(counts, edges, args.draws, args.chains)
    table, summary = compare(counts, edges, args.draws, args.chains, mcmc=mcmc)
    if args.save_reference:
        save_reference(args.save_reference, counts, edges, mcmc,
                       f"PyMC NUTS fit of statistics/bym2.py's model (benchmarks/bym2_mcmc.py): region {args.region}, "
                       f"{args.indicator} {args.period}, {args.chains} chains x {args.draws} draws, seed 46")
    with pd.option_context("display.width", 200, "display.max_rows", 400, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
