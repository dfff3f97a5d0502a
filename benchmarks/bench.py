"""Scale benchmark (`make bench`): how the build's time and memory grow with the input.

Not a test: it prints figures and writes them to `benchmarks/scale.json`,
`benchmarks/scale.png` and `BENCHMARKS.md`. For each scale of generated national microdata
(all 346 communes, 1990-2019; scale 1 is about 10 million records):

1. generate the files with the calibrated generator (DEIS layouts, deaths as a published ZIP);
2. reference: a plain DuckDB `read_csv` of the same files into tables, every column as text;
3. the build a user runs: one `dbt build` (models and data tests) on a fresh file, with wall
   time and the peak resident memory of the whole process tree, sampled every 20 ms;
4. delete the files before the next size.

At the largest scale (`--phases-scale`) the build is also run phase by phase (one dbt invocation per
layer) to explain where the time above the raw read goes. Trend fitting is timed once, batched against a
plain statsmodels loop. The growth exponent is the least-squares slope of log(time) on
log(records).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import duckdb
import numpy as np

from infant_mortality.tools.publish import BUILD_ARGS

REPO_ROOT = Path(__file__).resolve().parents[1]  # benchmarks/bench.py
DBT = str(Path(sys.executable).with_name("dbt"))
DEFAULT_SCALES = (0.25, 0.5, 1, 2, 4, 8)

# (phase, dbt arguments) for the phase-by-phase run, in order, on one DuckDB file.
PHASES = [
    ("seed (reference tables)", ["seed"]),
    ("ingest (files -> typed staging tables)", ["run", "--select", "path:models/inputs/staging"]),
    ("counts, audit and yearly rates", ["run", "--select", "+fct_area_year_rates",
                                        "--exclude", "path:models/inputs/staging"]),
    ("comparisons, trends, inequity, maps", ["run", "--exclude", "path:models/inputs/staging",
                                             "+fct_area_year_rates"]),
    ("data tests and unit tests", ["test"]),
]


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    output: str


@dataclass
class SizePoint:
    scale: float
    records: int
    death_records: int
    birth_records: int
    csv_bytes: int
    generate_seconds: float
    raw_read_seconds: float
    build_seconds: float
    peak_rss_mb: float
    database_mb: float
    load_average: float  # 1-minute load average of the machine when the build started

    @property
    def build_over_raw(self) -> float:
        return self.build_seconds / self.raw_read_seconds


# --------------------------------------------------------------------------------------------
# Measuring a process tree
# --------------------------------------------------------------------------------------------

def _descendants(pid: int) -> list[int]:
    """The process and every process below it, from /proc/<pid>/task/*/children."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue.extend(int(child) for child in (task / "children").read_text().split())
            except (OSError, ValueError):
                pass
    return found


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def run_measured(command: list[str], env: dict | None = None, log=None) -> Run:
    """Run a command to completion; wall seconds and the peak of the summed resident memory of
    its whole process tree (sampled every 20 ms), with its output. Stops on failure."""
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env or os.environ.copy(),
                                   stdout=out, stderr=subprocess.STDOUT)
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, sum(_rss_mb(pid) for pid in _descendants(process.pid)))
            time.sleep(0.02)
        out.seek(0)
        output = out.read()
    seconds = time.perf_counter() - started
    if log:
        log.write(f"$ {' '.join(command)}\n{output}\n")
        log.flush()
    if process.returncode != 0:
        raise SystemExit(f"bench: `{' '.join(command)}` failed (exit {process.returncode}):\n{output[-4000:]}")
    return Run(seconds, peak, output)


def machine_description() -> str:
    cpu = "unknown CPU"
    memory = "unknown RAM"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
        memory_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                             if line.startswith("MemTotal")))
        memory = f"{memory_kb / 1024 ** 2:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"{cpu}, {os.cpu_count()} cores, {memory}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, DuckDB {duckdb.__version__}")


# --------------------------------------------------------------------------------------------
# One size
# --------------------------------------------------------------------------------------------

def generate(files: Path, scale: float, years: str, log) -> tuple[Run, dict]:
    command = [sys.executable, "-m", "infant_mortality.tools.generate_deis", "--out", str(files),
               "--years", years, "--scale", str(scale), "--zip"]
    run = run_measured(command, log=log)
    return run, json.loads((files / "generation_manifest.json").read_text())


def csv_bytes(files: list[Path]) -> int:
    """Bytes of CSV text the build reads (a ZIP counts with its members' uncompressed size)."""
    total = 0
    for path in files:
        if path.suffix.lower() == ".zip":
            with zipfile.ZipFile(path) as archive:
                total += sum(member.file_size for member in archive.infolist())
        else:
            total += path.stat().st_size
    return total


def raw_read_seconds(deaths_zip: Path, births: Path, workdir: Path) -> float:
    """The reference: DuckDB alone loading the same records into tables of a database file,
    every column as text (no typing, no line numbers, no checks). The ZIP is unpacked first,
    untimed; the user's build includes its own unpacking."""
    unpacked = workdir / "raw_unpacked"
    with zipfile.ZipFile(deaths_zip) as archive:
        archive.extractall(unpacked)
    database = workdir / "raw_read.duckdb"
    started = time.perf_counter()
    with duckdb.connect(str(database)) as con:
        for name, pattern, header in (("deaths", unpacked / "*.csv", "false"), ("births", births / "*.csv", "true")):
            con.execute(f"create table {name} as select * from read_csv('{pattern}', delim=';', "
                        f"header={header}, all_varchar=true, encoding='latin-1')")
    seconds = time.perf_counter() - started
    database.unlink()
    shutil.rmtree(unpacked)
    return seconds


def dbt_environment(workdir: Path, database: Path) -> dict:
    return {**os.environ, "IMR_DUCKDB_PATH": str(database), "DBT_TARGET_PATH": str(workdir / "target"),
            "DBT_LOG_PATH": str(workdir / "logs")}


def dbt_vars(files: Path, manifest: dict, cache: Path) -> str:
    return json.dumps({"vital_source": "deis_microdata",
                       "deis_deaths_path": str(files / manifest["deaths_file"]),
                       "deis_births_path": str(files / manifest["births_folder"]),
                       "deis_cache_dir": str(cache)})


def user_build(workdir: Path, files: Path, manifest: dict, log) -> tuple[Run, float]:
    """One `dbt build` as `make warehouse` runs it (publish.BUILD_ARGS) on a fresh database file
    and a fresh ZIP cache."""
    database = workdir / "build.duckdb"
    cache = workdir / "cache"
    for stale in (database, database.with_name(database.name + ".wal")):
        stale.unlink(missing_ok=True)
    shutil.rmtree(cache, ignore_errors=True)
    command = [DBT, "--no-use-colors", *BUILD_ARGS, "--profiles-dir", "profiles",
               "--vars", dbt_vars(files, manifest, cache)]
    run = run_measured(command, dbt_environment(workdir, database), log)
    size_mb = database.stat().st_size / 1e6
    return run, size_mb


def phases(workdir: Path, files: Path, manifest: dict, log) -> list[dict]:
    """The same build, one dbt invocation per layer, to see where the time goes. Each
    invocation pays dbt's start-up, measured alone with a no-op `dbt ls`."""
    database = workdir / "phases.duckdb"
    cache = workdir / "cache_phases"
    database.unlink(missing_ok=True)
    shutil.rmtree(cache, ignore_errors=True)
    env = dbt_environment(workdir, database)
    tail = ["--profiles-dir", "profiles", "--vars", dbt_vars(files, manifest, cache)]
    base = [DBT, "--no-use-colors"]
    startup = run_measured(base + ["ls", "--resource-type", "model"] + tail, env, log)
    rows = [{"phase": "dbt start-up (no-op `dbt ls`, paid by every phase)", "seconds": startup.seconds,
             "peak_rss_mb": startup.peak_rss_mb}]
    for name, arguments in PHASES:
        run = run_measured(base + arguments + tail, env, log)
        rows.append({"phase": name, "seconds": run.seconds, "peak_rss_mb": run.peak_rss_mb})
    database.unlink(missing_ok=True)
    shutil.rmtree(cache, ignore_errors=True)
    return rows


def measure_size(scale: float, years: str, workdir: Path, log, with_phases: bool, with_trends: bool):
    """Generate, read raw, build; then delete the files. Returns the point and the extras."""
    size_dir = workdir / f"scale_{scale:g}"
    shutil.rmtree(size_dir, ignore_errors=True)
    files = size_dir / "files"
    try:
        generated, manifest = generate(files, scale, years, log)
        deaths_zip = files / manifest["deaths_file"]
        births = files / manifest["births_folder"]
        n_bytes = csv_bytes([deaths_zip, *sorted(births.glob("*.csv"))])
        raw = raw_read_seconds(deaths_zip, births, size_dir)
        load_average = os.getloadavg()[0]
        build, database_mb = user_build(size_dir, files, manifest, log)
        point = SizePoint(scale=scale, records=manifest["records"]["deaths"] + manifest["records"]["births"],
                          death_records=manifest["records"]["deaths"], birth_records=manifest["records"]["births"],
                          csv_bytes=n_bytes, generate_seconds=generated.seconds, raw_read_seconds=raw,
                          build_seconds=build.seconds, peak_rss_mb=build.peak_rss_mb, database_mb=database_mb,
                          load_average=load_average)
        extras = {}
        if with_trends:
            extras["trends"] = benchmark_trend_fitting(size_dir / "build.duckdb")
        if with_phases:
            extras["phases"] = phases(size_dir, files, manifest, log)
    except BaseException:
        print(f"bench: scale {scale:g} failed; its files are kept in {size_dir} for inspection", file=sys.stderr)
        raise
    shutil.rmtree(size_dir, ignore_errors=True)
    return point, extras


# --------------------------------------------------------------------------------------------
# Trend fitting
# --------------------------------------------------------------------------------------------

def benchmark_trend_fitting(database: Path) -> dict:
    """The batched Prais-Winsten of the trend model against a plain statsmodels loop fitting
    the same estimable series one at a time."""
    from infant_mortality.statistics.prais_winsten import prais_winsten_trend
    from infant_mortality.statistics.trends import AREA_KEYS, fit_series_trends

    with duckdb.connect(str(database), read_only=True) as con:
        rates = con.execute("select * from marts.fct_area_year_rates").df()
        periods = con.execute("select * from intermediate.int_analysis_periods").df()
    # fct_trends' Prais-Winsten rows (the mart also fits the count model and joinpoint).
    result = fit_series_trends(rates, AREA_KEYS, periods=periods)
    batched_seconds = result.attrs["fit_seconds"]
    fitted = result[result["trend"] != "not_estimable"]

    usable = rates[rates["rate_per_1000"] > 0].sort_values("year")
    by_series = {key: frame for key, frame in usable.groupby(["area_level", "area_code", "indicator"])}
    started = time.perf_counter()
    for row in fitted.itertuples():
        series = by_series[(row.area_level, row.area_code, row.indicator)]
        window = series[(series["year"] >= row.period_start) & (series["year"] <= row.period_end)]
        prais_winsten_trend(np.log10(window["rate_per_1000"].to_numpy(float)), window["year"].to_numpy(float))
    return {"series": len(result), "fitted": len(fitted), "batched_seconds": batched_seconds,
            "baseline_seconds": time.perf_counter() - started}


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

# BENCHMARKS.md holds this benchmark's report and, between these markers, the section of
# `make bench-compare` (benchmarks/bench_compare.py); each rewrites only its own part.
SECTION_START = "<!-- bench-compare: start -->"
SECTION_END = "<!-- bench-compare: end -->"


def replace_section(document: str, section: str) -> str:
    """`document` with the text between the bench-compare markers replaced by `section` (markers
    kept), or with the marked section appended when there is none yet."""
    block = f"{SECTION_START}\n{section.strip()}\n{SECTION_END}"
    if SECTION_START in document and SECTION_END in document:
        head, rest = document.split(SECTION_START, 1)
        return head + block + rest.split(SECTION_END, 1)[1]
    return document.rstrip("\n") + "\n\n" + block + "\n"


def marked_section(document: str) -> str:
    """The marked bench-compare section of `document`, markers excluded ('' when there is none)."""
    if SECTION_START not in document or SECTION_END not in document:
        return ""
    return document.split(SECTION_START, 1)[1].split(SECTION_END, 1)[0].strip()


# Other sections of BENCHMARKS.md, each between `<!-- name: start -->` and `<!-- name: end -->`
# (the new user's `make warehouse` timings, written by hand): `make bench` keeps them as they are.
_MARKED = re.compile(r"<!-- ([a-z0-9-]+): start -->.*?<!-- \1: end -->", re.S)


def other_sections(document: str) -> list[str]:
    """Every marked section of `document` but bench-compare's, markers included, in order."""
    return [match[0] for match in _MARKED.finditer(document) if match[1] != "bench-compare"]


def keep_other_sections(report: str, previous: str) -> str:
    """`report` with the marked sections of `previous` that it lacks appended."""
    for block in other_sections(previous):
        if block not in report:
            report = report.rstrip("\n") + "\n\n" + block + "\n"
    return report



def growth_exponent(points: list[SizePoint], value) -> float:
    """Least-squares slope of log(value) on log(records): 1 is linear growth."""
    x = np.log([p.records for p in points])
    y = np.log([value(p) for p in points])
    return float(np.polyfit(x, y, 1)[0])


def write_chart(points: list[SizePoint], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [p.records / 1e6 for p in points]
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    time_axis.loglog(records, [p.build_seconds for p in points], "o-", label="dbt build (user's build)")
    time_axis.loglog(records, [p.raw_read_seconds for p in points], "s--", label="plain DuckDB read_csv")
    time_axis.set(xlabel="records (millions)", ylabel="seconds", title="Time")
    time_axis.legend()
    memory_axis.semilogx(records, [p.peak_rss_mb / 1024 for p in points], "o-", color="tab:red")
    memory_axis.axhline(3, color="grey", linestyle=":", label="goal: 3 GB")
    memory_axis.set(xlabel="records (millions)", ylabel="peak resident memory (GB)", title="Memory",
                    ylim=(0, max(4, max(p.peak_rss_mb for p in points) / 1024 * 1.2)))
    memory_axis.legend()
    for axis in (time_axis, memory_axis):
        axis.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)


def render(points: list[SizePoint], extras: dict, memory_limit: str, years: str) -> str:
    time_exponent = growth_exponent(points, lambda p: p.build_seconds)
    raw_exponent = growth_exponent(points, lambda p: p.raw_read_seconds)
    largest = points[-1]
    table = "\n".join(
        f"| {p.scale:g} | {p.records:,} | {p.csv_bytes / 1e9:.2f} | {p.raw_read_seconds:.1f} | "
        f"{p.build_seconds:.1f} | {p.build_over_raw:.2f} | {p.peak_rss_mb:,.0f} | {p.database_mb:,.0f} | "
        f"{p.load_average:.1f} |"
        for p in points)
    phase_rows = "\n".join(f"| {row['phase']} | {row['seconds']:.1f} | {row['peak_rss_mb']:,.0f} |"
                           for row in extras.get("phases", []))
    trend = extras.get("trends")
    trend_text = ""
    if trend:
        speedup = trend["baseline_seconds"] / max(trend["batched_seconds"], 1e-9)
        trend_text = f"""
## Trend fitting (scale 1)

All {trend['series']:,} series (every area x indicator x period; {trend['fitted']:,} estimable):
batched Prais-Winsten {trend['batched_seconds']:.3f} s, a plain statsmodels loop over the same
series {trend['baseline_seconds']:.2f} s ({speedup:,.0f} times slower; same estimates, tested to
1e-10 in `tests/trends/test_prais_winsten.py`).
"""
    return f"""# Benchmarks

Produced by `make bench` (`python benchmarks/bench.py`); not a test. Raw figures:
`benchmarks/scale.json`; chart: `benchmarks/scale.png`.

**Machine:** {machine_description()}

**Input:** generated DEIS-layout microdata (`imr-generate-deis`), all 16 regions (346 communes),
years {years}, deaths as one ZIP (latin-1, no header, as published) and births one file a year;
the generator's `--scale` multiplies every count. **Memory limit:** DuckDB `memory_limit` =
`{memory_limit}` (dbt var `duckdb_memory_limit`), spilling to DuckDB's temporary directory.

## How the cost grows

Build = one `dbt build` (all models and data tests) on a fresh database file and an empty ZIP
cache (the deaths member is inflated, checked and scanned afresh, and kept as gzip); peak = the
summed resident memory of the whole process tree. Raw read = plain DuckDB `read_csv` of the same
files into tables, all columns as text (the ZIP unpacked beforehand, untimed). Load avg = the machine's 1-minute
load average when the build started (2 cores: above 2, other work was competing for them).

| scale | records | CSV GB | raw read s | build s | build / raw | peak MB | database MB | load avg |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{table}

![time and memory against records](benchmarks/scale.png)

**Growth exponent** (slope of log time on log records): build **{time_exponent:.2f}**, raw read
{raw_exponent:.2f}. Peak memory over all sizes: **{max(p.peak_rss_mb for p in points):,.0f} MB**.
At scale {largest.scale:g} the build takes {largest.build_over_raw:.2f} times the raw read.

## Where the time goes (scale {extras.get('phases_scale', 1):g})

The same build, one dbt invocation per layer on one file:

| phase | wall s | peak MB |
|---|---:|---:|
{phase_rows}
{trend_text}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/bench.py", description=__doc__.split("\n")[0])
    parser.add_argument("--scales", nargs="+", type=float, default=list(DEFAULT_SCALES),
                        help="generator scales to measure (default: 0.25 0.5 1 2 4 8)")
    parser.add_argument("--years", default="1990-2019", help="years to generate (default 1990-2019)")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "bench", help="scratch folder (gitignored)")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    parser.add_argument("--json", type=Path, default=REPO_ROOT / "benchmarks" / "scale.json")
    parser.add_argument("--phases-scale", type=float, default=None,
                        help="the size also built phase by phase, to see where the time goes (default: the largest)")
    args = parser.parse_args(argv)

    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    scales = sorted(args.scales)
    phases_scale = args.phases_scale if args.phases_scale is not None else scales[-1]
    memory_limit = effective_memory_limit()
    points, extras = [], {}
    with open(workdir / "bench.log", "w", encoding="utf-8") as log:
        for scale in scales:
            point, more = measure_size(scale, args.years, workdir, log, with_phases=scale == phases_scale,
                                       with_trends=scale == 1)
            extras.update(more)
            if "phases" in more:
                extras["phases_scale"] = scale
            points.append(point)
            print(f"scale {scale:g}: {point.records:,} records, {point.csv_bytes / 1e9:.2f} GB; raw read "
                  f"{point.raw_read_seconds:.1f} s; build {point.build_seconds:.1f} s "
                  f"({point.build_over_raw:.2f} x raw), peak {point.peak_rss_mb:,.0f} MB", flush=True)

    args.json.parent.mkdir(parents=True, exist_ok=True)
    summary = {"machine": machine_description(), "years": args.years, "memory_limit": memory_limit,
               "build_time_exponent": growth_exponent(points, lambda p: p.build_seconds),
               "sizes": [{**asdict(p), "build_over_raw": p.build_over_raw} for p in points], **extras}
    args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    write_chart(points, args.json.with_suffix(".png"))
    report = render(points, extras, memory_limit, args.years)
    previous = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
    compare = marked_section(previous)
    document = replace_section(report, compare) if compare else report
    args.output.write_text(keep_other_sections(document, previous), encoding="utf-8")
    print(report)
    print(f"written: {args.output}, {args.json}, {args.json.with_suffix('.png')}")
    return 0


def effective_memory_limit() -> str:
    """The DuckDB memory limit the build runs with: the dbt var's declared default, unless
    overridden (bench runs use the project's defaults)."""
    import yaml

    project = yaml.safe_load((REPO_ROOT / "dbt_project.yml").read_text(encoding="utf-8"))
    return str(project.get("vars", {}).get("duckdb_memory_limit", "DuckDB default (80% of RAM)"))


if __name__ == "__main__":
    raise SystemExit(main())
