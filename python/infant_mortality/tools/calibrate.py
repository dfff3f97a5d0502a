"""Measure the trend rules' error rate and power on the published warehouse's own births.

    make calibrate            # the harness, then `make warehouse` publishes fct_trend_calibration
    .venv/bin/python -m infant_mortality.tools.calibrate --null-replicates 40 --power-replicates 20

Reads the published warehouse (read-only): each area's yearly live births and deaths of one
indicator (`fct_area_year_rates`), the analysis periods of `fct_trends`, and the trend settings
the build used (`meta_build.vars_json`, mapped to the fitter's settings by the one mapping in
models/trends/intermediate/_trend_settings.yml). Draws deaths under each scenario of
`infant_mortality.statistics.trend_calibration.SCENARIOS`, classes them with the build's own
rule, and writes the table to `seeds/trend_calibration.csv` (the seed behind the mart
`fct_trend_calibration`), printing the null rates and the power as it goes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import duckdb
import pandas as pd
import yaml

from infant_mortality.statistics.trend_calibration import SCENARIOS, calibrate
from infant_mortality.statistics.trends import trend_settings
from infant_mortality.tools.publish import _default_project_dir
from infant_mortality.tools.query import connect, default_warehouse

SEED_FILE = Path("seeds") / "trend_calibration.csv"
SETTINGS_FILE = Path("models") / "trends" / "intermediate" / "_trend_settings.yml"
DEFAULT_SEED = 20261204


class CalibrationError(Exception):
    """One sentence for the user."""


def build_settings(vars_json: str, project_dir: Path) -> dict:
    """The fitter settings of the build: `_trend_settings.yml`'s `trend_settings` mapping
    (setting -> "{{ var('trend_x') }}") filled with the build's effective vars."""
    effective = json.loads(vars_json)
    spec = yaml.safe_load((project_dir / SETTINGS_FILE).read_text(encoding="utf-8"))
    mapping = next(m["config"]["trend_settings"] for m in spec["models"] if m["name"] == "int_trends")
    config = {}
    for setting, template in mapping.items():
        var = re.fullmatch(r"\{\{\s*var\('(\w+)'\)\s*\}\}", str(template))
        if var is None or var.group(1) not in effective:
            raise CalibrationError(f"{SETTINGS_FILE}: cannot read the var behind {setting!r} ({template!r}) "
                                   "from meta_build.vars_json; rebuild with `make warehouse`")
        config[setting] = str(effective[var.group(1)])
    return trend_settings(config)


def read_inputs(con: duckdb.DuckDBPyConnection, indicator: str) -> tuple[pd.DataFrame, pd.DataFrame, str, str]:
    """The births to simulate on, the analysis periods, the build's vars and a line naming the build."""
    births = con.execute(
        "select r.area_level, r.area_code, r.area_name, r.region_code, r.year, r.indicator, r.deaths, "
        "r.live_births, i.multiplier from marts.fct_area_year_rates r "
        "join marts.dim_indicator i using (indicator) "
        "where r.indicator = ? and r.live_births > 0 and r.deaths is not null and r.rate_per_1000 is not null "
        "order by r.area_level, r.area_code, r.year",
        [indicator]).df()
    if births.empty:
        raise CalibrationError(f"marts.fct_area_year_rates has no available rate of indicator {indicator!r}")
    periods = con.execute(
        "select distinct period_start, period_end from marts.fct_trends where indicator = ? order by all",
        [indicator]).df()
    periods["period_label"] = periods["period_start"].astype(str) + "-" + periods["period_end"].astype(str)
    (vars_json, source), = con.execute(
        "select vars_json, concat_ws(', ', vital_source, count_basis, scope_year_start || '-' || scope_year_end) "
        "from marts.meta_build").fetchall()
    n_areas = births.groupby(["area_level", "area_code"]).ngroups
    return births, periods, vars_json, f"{source}, {n_areas} areas"


def print_summary(table: pd.DataFrame) -> None:
    """The overall null rate of each method and scenario, and the headline power by band."""
    overall = table[(table.period_years == "all") & (table.deaths_band == "all")]
    shown = overall.pivot(index="method", columns="scenario", values="rate").round(4)
    print("\nShare classed (under null scenarios: increasing or decreasing; else the trend's direction):")
    print(shown.to_string())
    failing = table[table.holds_size.eq(False)]
    print(f"\nCells above the nominal size + 2 MC se: {len(failing)}"
          + ("" if failing.empty else "\n" + failing[["method", "scenario", "period_years", "deaths_band",
                                                       "rate", "mc_se"]].to_string(index=False)))


def replicates_by_scenario(scenarios, chosen: list[str], null_replicates: int, power_replicates: int) -> dict:
    """How many replicates each chosen scenario runs: the null ones `null_replicates`, the others `power_replicates`."""
    by_name = {s.name: s for s in scenarios}
    return {name: null_replicates if by_name[name].is_null else power_replicates for name in chosen}


def write_seed(table, out: Path, indicator: str, births_source: str, seed: int, settings: dict | None = None) -> None:
    """A calibration table as its committed seed: the indicator first, then the table, the run's
    settings, where the births came from and the random seed (the column order the seed keeps)."""
    table.insert(0, "indicator", indicator)
    for column, value in (settings or {}).items():
        table[column] = value
    table["births_source"] = births_source
    table["random_seed"] = seed
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False, float_format="%.12g")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.tools.calibrate",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--null-replicates", type=int, default=200,
                        help="replicates of each no-trend scenario (default 200)")
    parser.add_argument("--power-replicates", type=int, default=100,
                        help="replicates of each trend scenario (default 100)")
    parser.add_argument("--scenarios", nargs="+", choices=[s.name for s in SCENARIOS],
                        default=[s.name for s in SCENARIOS])
    parser.add_argument("--indicator", default="imr")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--warehouse", type=Path, default=None, help="default: the published warehouse")
    parser.add_argument("--out", type=Path, default=None, help=f"default: {SEED_FILE} of the project")
    args = parser.parse_args(argv)
    project = _default_project_dir()
    out = args.out or project / SEED_FILE
    try:
        con = connect(args.warehouse or default_warehouse())
        try:
            births, periods, vars_json, births_source = read_inputs(con, args.indicator)
        finally:
            con.close()
        settings = build_settings(vars_json, project)
    except (CalibrationError, duckdb.Error) as error:
        print(f"calibrate: {error}", file=sys.stderr)
        return 1
    replicates = replicates_by_scenario(SCENARIOS, args.scenarios, args.null_replicates, args.power_replicates)
    n_areas = births.groupby(["area_level", "area_code"]).ngroups
    print(f"calibrate: {n_areas} areas x {len(periods)} periods of {args.indicator}, "
          f"scenarios {', '.join(f'{k} ({v})' for k, v in replicates.items())}", flush=True)
    started = time.perf_counter()
    table = calibrate(births, periods, settings, replicates, args.seed,
                      progress=lambda line: print(f"  {line}", flush=True))
    write_seed(table, out, args.indicator, births_source, args.seed)
    print_summary(table)
    print(f"\nWrote {len(table)} rows to {out} in {time.perf_counter() - started:.0f} s; "
          "`make warehouse` publishes them as marts.fct_trend_calibration.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
