"""National-scale benchmark (`make bench`): generate, build phase by phase, measure, report.

Not a test: it prints figures and writes them to BENCHMARKS.md. Steps:

1. Generate DEIS-layout microdata for the chosen scope with the calibrated generator (default:
   all 346 communes, 1990-2019: about 7.5 million birth and 2.7 million death records).
2. Build the warehouse on it with the real dbt CLI, one phase per dbt invocation so that each
   phase's wall time and peak memory (max RSS of that process, from wait4) are measured:
   ingest (files -> typed staging tables), counts, rates, comparisons, trends, data tests,
   publish (drop staging, export Parquet). Each dbt invocation includes about 3 s of dbt
   start-up (imports, parsing), reported separately as `dbt startup` from a no-op run.
3. Fit every trend series twice, outside dbt, on the built rates: the batched Prais-Winsten of
   the trend mart, and a baseline plain statsmodels loop fitting the same series one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np


REPO_ROOT = Path(__file__).resolve().parents[2]
DBT = str(Path(sys.executable).with_name("dbt"))

# (phase, dbt arguments); run in this order on one DuckDB file.
PHASES = [
    ("ingest", ["run", "--select", "path:models/staging"]),
    ("counts", ["run", "--select", "int_deis__commune_year_counts", "int_commune_year_counts",
                "int_area_year_counts", "int_analysis_periods", "int_audit__count_problems",
                "int_audit__deis_records", "audit_data_quality", "dim_commune"]),
    ("rates", ["run", "--select", "fct_rates_commune_year"]),
    ("comparisons", ["run", "--select", "fct_commune_vs_region"]),
    ("trends", ["run", "--select", "fct_trends"]),
    ("data tests", ["test"]),
]


@dataclass
class Measure:
    phase: str
    seconds: float
    peak_mb: float
    detail: str = ""


def _high_water_mb(pid: int) -> float:
    """VmHWM of a live process: its peak resident memory so far (reset at exec, unlike the
    maxrss of wait4, which keeps the RSS the parent had when it forked)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def run_measured(command: list[str], env: dict, log) -> tuple[float, float, str]:
    """Run a command; return wall seconds, its peak resident memory in MB and its output."""
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, _high_water_mb(process.pid))
            time.sleep(0.02)
        out.seek(0)
        output = out.read()
    seconds = time.perf_counter() - started
    log.write(f"$ {' '.join(command)}\n{output}\n")
    if process.returncode != 0:
        raise SystemExit(f"bench: `{' '.join(command)}` failed (exit {process.returncode}):\n{output[-4000:]}")
    return seconds, peak, output


def machine_description() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        memory_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                             if line.startswith("MemTotal")))
        memory = f"{memory_kb / 1024 ** 2:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        memory = "unknown RAM"
    return (f"{cpu}, {os.cpu_count()} cores, {memory}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, DuckDB {duckdb.__version__}")


def csv_bytes(files: list[Path]) -> int:
    """Bytes of CSV text the build reads (a ZIP counts with its members' uncompressed size)."""
    total = 0
    for f in files:
        if f.suffix.lower() == ".zip":
            with zipfile.ZipFile(f) as archive:
                total += sum(member.file_size for member in archive.infolist())
        else:
            total += f.stat().st_size
    return total


def plain_duckdb_read(unpacked_deaths: Path, births: Path, n_bytes: int) -> Measure:
    """Reference: DuckDB alone loading the same files into tables, every column as text (no
    typing, no line numbers, no checks): the speed the ingest phase is compared with."""
    started = time.perf_counter()
    with duckdb.connect() as con:
        for name, folder, header in (("deaths", unpacked_deaths, "false"), ("births", births, "true")):
            con.execute(f"create table {name} as select * from read_csv('{folder}/*.csv', delim=';', "
                        f"header={header}, all_varchar=true, encoding='latin-1')")
    seconds = time.perf_counter() - started
    return Measure("reference: plain DuckDB read_csv into tables, same files", seconds, float("nan"),
                   f"{n_bytes / 1e6 / seconds:,.0f} MB/s")


def fit_rates(database: Path):
    """The yearly rates and periods the trend model reads, from the built file."""
    with duckdb.connect(str(database), read_only=True) as con:
        rates = con.execute("select * from marts.fct_rates_commune_year").df()
        periods = con.execute("select * from intermediate.int_analysis_periods").df()
    return rates, periods


def benchmark_trend_fitting(database: Path) -> dict:
    """Batched fit of all series vs a plain statsmodels loop over the same series."""
    from infant_mortality.prais_winsten import prais_winsten_trend
    from infant_mortality.trends import fit_trends

    rates, periods = fit_rates(database)
    result = fit_trends(rates, periods)
    batched_seconds = result.attrs["fit_seconds"]
    fitted = result[result["trend"] != "not_estimable"]

    # The baseline: the same series, one at a time, every iteration a statsmodels OLS.
    usable = rates[rates["rate_per_1000"] > 0].sort_values("year")
    by_series = {key: frame for key, frame in usable.groupby(["area_level", "area_code", "indicator"])}
    started = time.perf_counter()
    for row in fitted.itertuples():
        series = by_series[(row.area_level, row.area_code, row.indicator)]
        window = series[(series["year"] >= row.period_start) & (series["year"] <= row.period_end)]
        prais_winsten_trend(np.log10(window["rate_per_1000"].to_numpy(float)),
                            window["year"].to_numpy(float))
    baseline_seconds = time.perf_counter() - started
    return {"series": len(result), "fitted": len(fitted), "batched_seconds": batched_seconds,
            "baseline_seconds": baseline_seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--regions", nargs="*", default=None, help="region codes (default: all 16)")
    parser.add_argument("--years", default="1990-2019", help="years to generate (default 1990-2019)")
    parser.add_argument("--scale", type=float, default=1.0, help="generator scale factor")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "bench", help="scratch folder (gitignored)")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    parser.add_argument("--reuse-files", action="store_true", help="keep previously generated files")
    args = parser.parse_args(argv)

    workdir = args.workdir.resolve()
    files = workdir / "files"
    database = workdir / "bench.duckdb"
    workdir.mkdir(parents=True, exist_ok=True)
    log = open(workdir / "bench.log", "w", encoding="utf-8")
    measures: list[Measure] = []

    if not (args.reuse_files and (files / "generation_manifest.json").exists()):
        command = [sys.executable, "-m", "infant_mortality.generate_deis", "--out", str(files),
                   "--years", args.years, "--scale", str(args.scale), "--zip"]
        if args.regions:
            command += ["--regions", *args.regions]
        seconds, peak, _ = run_measured(command, os.environ.copy(), log)
        measures.append(Measure("generate files (not part of the build)", seconds, peak))
    manifest = json.loads((files / "generation_manifest.json").read_text())
    death_file = next(files.glob("synthetic_deis_deaths_*"))
    birth_files = sorted((files / "nacimientos").glob("*.csv"))
    n_deaths, n_births = manifest["records"]["deaths"], manifest["records"]["births"]
    n_bytes = csv_bytes([death_file, *birth_files])
    print(f"input: {n_deaths:,} death records + {n_births:,} birth records, {n_bytes / 1e9:.2f} GB of CSV")

    dbt_vars = json.dumps({"vital_source": "deis_microdata", "deis_deaths_path": str(death_file),
                           "deis_births_path": str(files / "nacimientos"),
                           "deis_cache_dir": str(workdir / "cache")})
    env = {**os.environ, "IMR_DUCKDB_PATH": str(database), "DBT_TARGET_PATH": str(workdir / "target"),
           "DBT_LOG_PATH": str(workdir / "logs")}
    for stale in (database, database.with_name(database.name + ".wal")):
        stale.unlink(missing_ok=True)

    base = [DBT, "--no-use-colors"]
    tail = ["--profiles-dir", "profiles", "--vars", dbt_vars]
    seconds, peak, _ = run_measured(base + ["seed"] + tail, env, log)
    measures.append(Measure("seed (reference)", seconds, peak))
    seconds, peak, _ = run_measured(base + ["ls", "--resource-type", "model"] + tail, env, log)
    startup = Measure("dbt startup (no-op `dbt ls`)", seconds, peak)
    build_total = 0.0
    for phase, dbt_args in PHASES:
        seconds, peak, output = run_measured(base + dbt_args + tail, env, log)
        detail = ""
        if phase == "ingest":
            working = max(seconds - startup.seconds, 1e-9)
            detail = (f"{(n_deaths + n_births) / working:,.0f} records/s, {n_bytes / 1e6 / working:,.0f} MB/s "
                      "of CSV after dbt startup (includes unpacking the ZIP)")
        if phase == "trends":
            line = next((l for l in output.splitlines() if l.startswith("fct_trends:")), "")
            detail = line.removeprefix("fct_trends: ")
        measures.append(Measure(phase, seconds, peak, detail))
        build_total += seconds

    publish_code = ("import sys; from pathlib import Path; from infant_mortality.publish import finalize_build; "
                    "marts, storage = finalize_build(Path(sys.argv[1]), Path(sys.argv[2])); "
                    "print(sum(m.rows for m in marts), 'mart rows', storage)")
    seconds, peak, output = run_measured([sys.executable, "-c", publish_code, str(database),
                                          str(workdir / "parquet")], env, log)
    measures.append(Measure("publish (drop staging, Parquet)", seconds, peak, output.strip()))
    build_total += seconds

    unpacked = max((workdir / "cache").iterdir(), key=lambda d: d.stat().st_mtime)  # this run's ZIP
    measures.append(plain_duckdb_read(unpacked, files / "nacimientos", n_bytes))
    trend = benchmark_trend_fitting(database)
    size_mb = database.stat().st_size / 1e6

    # What a user runs: one `dbt build` (models and tests) on a fresh file and a fresh ZIP cache.
    one_shot = workdir / "one_shot.duckdb"
    one_shot.unlink(missing_ok=True)
    one_vars = json.dumps({**json.loads(dbt_vars), "deis_cache_dir": str(workdir / "cache_one_shot")})
    seconds, peak, _ = run_measured(base + ["build", "--profiles-dir", "profiles", "--vars", one_vars],
                                    {**env, "IMR_DUCKDB_PATH": str(one_shot)}, log)
    single = Measure("single `dbt build` (all models and tests)", seconds, peak)
    report = render(args, measures, startup, build_total, single, trend, n_deaths, n_births, n_bytes, size_mb)
    print(report)
    args.output.write_text(report, encoding="utf-8")
    print(f"written to {args.output}")
    return 0


def render(args, measures, startup, build_total, single, trend, n_deaths, n_births, n_bytes, size_mb) -> str:
    scope = f"regions {' '.join(args.regions)}" if args.regions else "all 16 regions (346 communes)"
    peak = max(m.peak_mb for m in measures if not np.isnan(m.peak_mb))
    rows = "\n".join(
        f"| {m.phase} | {m.seconds:.1f} | {'' if np.isnan(m.peak_mb) else f'{m.peak_mb:,.0f}'} | {m.detail} |"
        for m in measures)
    speedup = trend["baseline_seconds"] / max(trend["batched_seconds"], 1e-9)
    return f"""# Benchmarks

Produced by `make bench` (`python -m infant_mortality.bench`); not a test. Re-run it to refresh.

**Machine:** {machine_description()}

**Input:** generated DEIS-layout microdata (`infant_mortality.generate_deis`), {scope},
years {args.years}, scale {args.scale:g}: {n_deaths:,} death records (all ages, one ZIP, latin-1,
no header, as published) and {n_births:,} birth records (one file per year), {n_bytes / 1e9:.2f} GB of CSV.

## Build, phase by phase

Each phase is one dbt invocation (or, for publish, one Python process) on the same DuckDB
file; peak memory is the maximum resident set of that process. Every dbt invocation pays
dbt's own start-up, measured alone as {startup.seconds:.1f} s (peak {startup.peak_mb:,.0f} MB).

| phase | wall s | peak MB | detail |
|---|---:|---:|---|
{rows}

**All phases:** {build_total:.1f} s wall; peak memory {peak:,.0f} MB. Warehouse file before
publish: {size_mb:,.0f} MB.

**The build a user runs** (one `dbt build`, models and data tests, fresh file, ZIP unpacked
afresh): **{single.seconds:.1f} s wall, peak memory {single.peak_mb:,.0f} MB.**

## Trend fitting

All {trend['series']:,} series (every area x indicator x period; {trend['fitted']:,} estimable):

| method | seconds | series per second |
|---|---:|---:|
| batched Prais-Winsten (`fct_trends`) | {trend['batched_seconds']:.3f} | {trend['fitted'] / max(trend['batched_seconds'], 1e-9):,.0f} |
| baseline: plain statsmodels loop, one series at a time | {trend['baseline_seconds']:.2f} | {trend['fitted'] / trend['baseline_seconds']:,.0f} |

The batched path is {speedup:,.0f} times faster and gives the same estimates (tested to 1e-10
in `tests/python/test_prais_winsten.py`).
"""


if __name__ == "__main__":
    raise SystemExit(main())
