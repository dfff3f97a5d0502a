"""Measure the cluster rule's error rate and power on the published warehouse's own births.

    make calibrate-clusters   # the harness, then `make warehouse` publishes fct_cluster_calibration
    .venv/bin/python -m infant_mortality.tools.calibrate_clusters --null-replicates 40 --power-replicates 20

Reads the published warehouse (read-only): each commune's pooled deaths and live births of one
indicator and every analysis period (`fct_commune_vs_region`, the counts `fct_spatial_clusters`
reads), the neighbour pairs (`dim_commune_neighbours`) and the build's `cluster_fdr_alpha` and
`cluster_permutations` (`meta_build.vars_json`). Draws deaths under each scenario of
`infant_mortality.statistics.cluster_calibration.SCENARIOS`, types them with the mart's own
procedure, and writes the table to `seeds/cluster_calibration.csv` (the seed behind the mart
`fct_cluster_calibration`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import duckdb
import pandas as pd

from infant_mortality.statistics.cluster_calibration import SCENARIOS, calibrate
from infant_mortality.tools.calibrate import replicates_by_scenario, write_seed
from infant_mortality.tools.publish import _default_project_dir
from infant_mortality.tools.query import connect, default_warehouse

SEED_FILE = Path("seeds") / "cluster_calibration.csv"
DEFAULT_SEED = 20261206
# Talca and its five neighbours: a mid-sized group of the central valley (about 45,000 births
# and 340 deaths in 2010-2019), neither the capital's nor a village's numbers.
DEFAULT_PLANTED_CENTRE = "07101"


class CalibrationError(Exception):
    """One sentence for the user."""


def read_inputs(con: duckdb.DuckDBPyConnection, indicator: str):
    """The pooled counts, the neighbour pairs, the build's cluster vars and a line naming the build."""
    pooled = con.execute(
        "select commune_code, commune_name, region_code, indicator, period_start, period_end, deaths, "
        "live_births from marts.fct_commune_vs_region where indicator = ? order by all", [indicator]).df()
    if pooled.empty:
        raise CalibrationError(f"marts.fct_commune_vs_region has no row of indicator {indicator!r}")
    neighbours = con.execute(
        "select commune_code, neighbour_code from marts.dim_commune_neighbours order by all").df()
    (vars_json, source), = con.execute(
        "select vars_json, concat_ws(', ', vital_source, count_basis, scope_year_start || '-' || scope_year_end) "
        "from marts.meta_build").fetchall()
    effective = json.loads(vars_json)
    try:
        alpha, permutations = float(effective["cluster_fdr_alpha"]), int(effective["cluster_permutations"])
    except KeyError as missing:
        raise CalibrationError(f"meta_build.vars_json has no {missing}; rebuild with `make warehouse`") from None
    n_communes = pooled["commune_code"].nunique()
    return pooled, neighbours, alpha, permutations, f"{source}, {n_communes} communes"


def print_summary(table: pd.DataFrame) -> None:
    """The country's rates of each scenario, period and rule."""
    shown = table[table["area"].isin(["country", "planted group"])]
    print(shown[["scenario", "period_start", "period_end", "rule", "area", "commune_rate", "commune_mc_se",
                 "familywise_rate", "familywise_mc_se", "holds_level"]].round(4).to_string(index=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.tools.calibrate_clusters",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--null-replicates", type=int, default=400,
                        help="replicates of each scenario without a planted cluster (default 400)")
    parser.add_argument("--power-replicates", type=int, default=200,
                        help="replicates of the planted cluster (default 200)")
    parser.add_argument("--scenarios", nargs="+", choices=[s.name for s in SCENARIOS],
                        default=[s.name for s in SCENARIOS])
    parser.add_argument("--planted-centre", default=DEFAULT_PLANTED_CENTRE,
                        help=f"commune code at the centre of the planted cluster (default {DEFAULT_PLANTED_CENTRE}, Talca)")
    parser.add_argument("--indicator", default="imr")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--warehouse", type=Path, default=None, help="default: the published warehouse")
    parser.add_argument("--out", type=Path, default=None, help=f"default: {SEED_FILE} of the project")
    args = parser.parse_args(argv)
    out = args.out or _default_project_dir() / SEED_FILE
    try:
        con = connect(args.warehouse or default_warehouse())
        try:
            pooled, neighbours, alpha, permutations, births_source = read_inputs(con, args.indicator)
        finally:
            con.close()
    except (CalibrationError, duckdb.Error) as error:
        print(f"calibrate_clusters: {error}", file=sys.stderr)
        return 1
    replicates = replicates_by_scenario(SCENARIOS, args.scenarios, args.null_replicates, args.power_replicates)
    print(f"calibrate_clusters: {pooled['commune_code'].nunique()} communes of {args.indicator}, alpha {alpha}, "
          f"{permutations} permutations; {', '.join(f'{k} ({v})' for k, v in replicates.items())}", flush=True)
    started = time.perf_counter()
    table = calibrate(pooled, neighbours, replicates, args.seed, alpha, permutations, args.planted_centre,
                      progress=lambda line: print(f"  {line}", flush=True))
    write_seed(table, out, args.indicator, births_source, args.seed,
               settings={"permutations": permutations, "planted_centre": args.planted_centre})
    print_summary(table)
    print(f"\nWrote {len(table)} rows to {out} in {time.perf_counter() - started:.0f} s; "
          "`make warehouse` publishes them as marts.fct_cluster_calibration.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
