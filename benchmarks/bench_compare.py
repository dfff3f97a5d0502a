"""Side-by-side benchmark (`make bench-compare`): the warehouse against the script an analyst
would write instead.

Not a test. Each case runs the warehouse and the project's baseline scripts
(`benchmarks/baselines/`: pandas with `usecols`, one DuckDB SQL) as whole processes, in turns
(warehouse, script, script, warehouse, ...), so that every side sees the same load of a shared
machine; it reports the median wall time, CPU time (user + system of the process and its
children) and peak resident memory (the largest process of the tree, `ru_maxrss`) of each, and
the ratios of the medians. Every case also times dbt's floor, a no-op `dbt ls` of one model
(importing dbt-core, reading the project and writing its artifacts: what any `dbt build` pays
before its first node), in the same turns, and reports each warehouse ratio twice: whole, and
above the floor ((warehouse - floor) / script). Two cases:

- bundled: `dbt build` on a fresh file, `make warehouse` (the publish step) rebuilt over a
  previous release, and `dbt build` of only the marts the scripts compute (SCRIPT_MARTS: the
  same work by the warehouse's rules), against the bundled-data scripts (rates with exact
  limits, each commune against its region for three periods, a GLSAR trend per series);
- microdata: generated national DEIS microdata (`--scale`, deaths as the published ZIP),
  `dbt build` on a fresh file and ZIP cache, against the counting scripts and DuckDB loading
  every column as text (unzip included in every script).

The last `dbt build` of each case is profiled from dbt's `run_results.json` and a 0.2 s sample of
the build's CPU time: per model, per layer, the critical path and how many cores stood idle.
Results: `benchmarks/compare.json` and a section of BENCHMARKS.md (between the markers below;
`make bench` keeps it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import REPO_ROOT, machine_description, replace_section  # benchmarks/bench.py, beside this script
from infant_mortality.tools.publish import BUILD_ARGS

DBT = str(Path(sys.executable).with_name("dbt"))
BASELINES = REPO_ROOT / "benchmarks" / "baselines"
# What the figures mean and what was changed for them: written by hand, shown after the tables.
NOTES = REPO_ROOT / "benchmarks" / "compare_notes.md"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Measure:
    wall_seconds: float
    cpu_seconds: float  # user + system of the process and every child it waited for
    peak_rss_mb: float  # ru_maxrss: the largest single process of the tree
    load_average: float  # the machine's 1-minute load average when the run started


@dataclass
class Contender:
    """One command of a case; `prepare` runs untimed before each run (a fresh database...)."""
    name: str
    command: list[str]
    env: dict | None = None
    prepare: callable = None


# --------------------------------------------------------------------------------------------
# Measuring one process tree
# --------------------------------------------------------------------------------------------

def _process_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by a live process (all its threads), from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def measure(command: list[str], env: dict | None = None, cpu_samples: list | None = None) -> Measure:
    """Run a command to completion and return its whole-process figures. With `cpu_samples`, the
    process's own CPU seconds are appended as (elapsed seconds, cpu seconds) every 0.2 s."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
        done = threading.Event()
        if cpu_samples is not None:
            def sample():
                while not done.wait(0.2):
                    cpu_samples.append((time.perf_counter() - started, _process_cpu_seconds(process.pid)))
            threading.Thread(target=sample, daemon=True).start()
        _, status, usage = os.wait4(process.pid, 0)
        done.set()
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            output.seek(0)
            tail = output.read().decode(errors="replace")[-4000:]
            raise SystemExit(f"bench-compare: `{' '.join(command)}` failed (exit {process.returncode}):\n{tail}")
    return Measure(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, load)


def alternate(contenders: list[Contender], repeat: int, log=print) -> dict[str, list[Measure]]:
    """`repeat` rounds; each round runs every contender once, the order reversed every other
    round (A B C, C B A, ...) so that no side always runs first or after the same neighbour."""
    runs = {c.name: [] for c in contenders}
    for round_number in range(repeat):
        order = contenders if round_number % 2 == 0 else contenders[::-1]
        for contender in order:
            if contender.prepare:
                contender.prepare()
            result = measure(contender.command, contender.env)
            runs[contender.name].append(result)
            log(f"  round {round_number + 1}/{repeat}: {contender.name}: {result.wall_seconds:.1f} s wall, "
                f"{result.cpu_seconds:.1f} s CPU, {result.peak_rss_mb:,.0f} MB, load {result.load_average:.1f}")
    return runs


def medians(runs: list[Measure]) -> dict[str, float]:
    return {key: statistics.median(getattr(run, key) for run in runs)
            for key in ("wall_seconds", "cpu_seconds", "peak_rss_mb", "load_average")}


def ratio_rows(runs: dict[str, list[Measure]], warehouse: str, scripts: list[str],
               floor: str | None = None) -> list[dict]:
    """One row per (warehouse, script) pair: the medians of both and their ratios. With `floor`
    (the contender timing dbt's no-op), also the floor's medians and the wall and CPU ratios of the
    warehouse above it: (warehouse - floor) / script, the work dbt's start-up does not explain."""
    rows = []
    ours = medians(runs[warehouse])
    below = medians(runs[floor]) if floor else None
    for script in scripts:
        theirs = medians(runs[script])
        row = {"warehouse": warehouse, "script": script, "runs": len(runs[script]),
               **{f"warehouse_{k}": v for k, v in ours.items()},
               **{f"script_{k}": v for k, v in theirs.items()},
               "wall_ratio": ours["wall_seconds"] / theirs["wall_seconds"],
               "cpu_ratio": ours["cpu_seconds"] / theirs["cpu_seconds"],
               "memory_ratio": ours["peak_rss_mb"] / theirs["peak_rss_mb"]}
        if below:
            row.update({"floor_wall_seconds": below["wall_seconds"], "floor_cpu_seconds": below["cpu_seconds"],
                        "wall_ratio_above_floor": (ours["wall_seconds"] - below["wall_seconds"]) / theirs["wall_seconds"],
                        "cpu_ratio_above_floor": (ours["cpu_seconds"] - below["cpu_seconds"]) / theirs["cpu_seconds"]})
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------
# Profile of one dbt build
# --------------------------------------------------------------------------------------------

def _layer(unique_id: str, original_path: str) -> str:
    kind = unique_id.split(".", 1)[0]
    if kind in ("test", "unit_test"):
        return "tests (data and unit)"
    if kind == "seed":
        return "seeds"
    if kind == "operation":
        return "project hooks"
    # The folder under models/ (a room, e.g. trends, inputs/staging/deis); a node without a
    # file (dbt gives some none) is named by its kind.
    folder = Path(original_path).parts[1:-1]
    return "/".join(folder) if folder else kind


def critical_path(nodes: dict[str, dict]) -> tuple[float, list[str]]:
    """Longest chain of execution times through the build's DAG. In `dbt build` a node starts
    only after its parents and the tests of its parents have passed, so those are its inputs
    (a test of several models, e.g. a relationship, gates none of their children).
    `nodes`: unique_id -> {"seconds", "parents"} (parents outside `nodes` are ignored)."""
    tests_of: dict[str, list[str]] = {}
    for node_id, node in nodes.items():
        if node_id.startswith(("test.", "unit_test.")) and len(set(node["parents"])) == 1:
            tests_of.setdefault(node["parents"][0], []).append(node_id)
    finish: dict[str, tuple[float, list[str]]] = {}

    def longest(node_id: str) -> tuple[float, list[str]]:
        if node_id not in finish:
            inputs = set(nodes[node_id]["parents"])
            if not node_id.startswith(("test.", "unit_test.")):  # tests wait for their models only
                inputs |= {test for p in nodes[node_id]["parents"] for test in tests_of.get(p, [])}
            best = max((longest(i) for i in inputs if i in nodes), default=(0.0, []))
            finish[node_id] = (best[0] + nodes[node_id]["seconds"], best[1] + [node_id])
        return finish[node_id]

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(nodes) + 100))
    return max((longest(n) for n in nodes), default=(0.0, []))


def busy_threads(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Mean number of nodes running at once between start and end (seconds on one clock)."""
    covered = sum(max(0.0, min(b, end) - max(a, start)) for a, b in intervals)
    return covered / (end - start) if end > start else 0.0


def attribute_cpu(samples: list[tuple[float, float]], spans: dict[str, tuple[float, float]]) -> dict[str, float]:
    """CPU seconds of each span (a node: begin, end), from samples of the process's cumulative CPU
    (elapsed, cpu): the CPU of each interval between samples is shared among the spans running
    in it, in proportion to the time each ran there. CPU used while no span ran is not shared."""
    shares = dict.fromkeys(spans, 0.0)
    clean = [(t, cpu) for t, cpu in samples if cpu == cpu]  # a NaN sample: the process had gone
    for (a, cpu_a), (b, cpu_b) in zip(clean, clean[1:]):
        overlap = {key: max(0.0, min(b, end) - max(a, begin)) for key, (begin, end) in spans.items()}
        running = sum(overlap.values())
        for key, seconds in overlap.items():
            if seconds > 0:
                shares[key] += (cpu_b - cpu_a) * seconds / running
    return shares


def profile_build(target: Path, cpu_samples: list[tuple[float, float]], wall: float, started_epoch: float) -> dict:
    """Where the seconds of one `dbt build` went: per node and per layer from run_results.json
    (dbt's own timings), the critical path through the DAG, and the CPU used while the nodes ran
    (from the samples) against the two cores the machine has."""
    from datetime import datetime

    results = json.loads((target / "run_results.json").read_text())["results"]
    manifest = json.loads((target / "manifest.json").read_text())
    entries = {**manifest["nodes"], **manifest.get("unit_tests", {})}

    def epoch(stamp: str) -> float:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

    nodes, intervals = {}, []
    for result in results:
        execute = [t for t in result["timing"] if t["name"] == "execute" and t.get("started_at")]
        compile_ = [t for t in result["timing"] if t["name"] == "compile" and t.get("started_at")]
        if not execute:
            continue
        begin = epoch((compile_ or execute)[0]["started_at"]) - started_epoch
        finish = epoch(execute[0]["completed_at"]) - started_epoch
        entry = entries.get(result["unique_id"], {})
        nodes[result["unique_id"]] = {"name": entry.get("name", result["unique_id"]),
                                      "seconds": finish - begin, "begin": begin, "end": finish,
                                      "parents": entry.get("depends_on", {}).get("nodes", []),
                                      "layer": _layer(result["unique_id"], entry.get("original_file_path", ""))}
        intervals.append((begin, finish))
    first = min(n["begin"] for n in nodes.values())
    last = max(n["end"] for n in nodes.values())

    def cpu_between(a: float, b: float) -> float:
        inside = [cpu for t, cpu in [(0.0, 0.0), *cpu_samples] if a <= t <= b and cpu == cpu]
        return inside[-1] - inside[0] if len(inside) > 1 else 0.0

    node_cpu = attribute_cpu(cpu_samples, {key: (node["begin"], node["end"]) for key, node in nodes.items()})
    layers: dict[str, dict] = {}
    for key, node in nodes.items():
        node["cpu_seconds"] = node_cpu[key]
        layer = layers.setdefault(node["layer"], {"nodes": 0, "node_seconds": 0.0, "cpu_seconds": 0.0,
                                                  "begin": node["begin"], "end": node["end"]})
        layer["nodes"] += 1
        layer["node_seconds"] += node["seconds"]
        layer["cpu_seconds"] += node["cpu_seconds"]
        layer["begin"], layer["end"] = min(layer["begin"], node["begin"]), max(layer["end"], node["end"])
    path_seconds, path = critical_path(nodes)
    slowest = sorted(nodes.items(), key=lambda item: -item[1]["seconds"])[:15]
    return {
        "wall_seconds": wall,
        "startup_seconds": first,
        "startup_cpu_seconds": cpu_between(0.0, first),
        "nodes_seconds": last - first,
        "nodes_cpu_seconds": cpu_between(first, last),
        "shutdown_seconds": wall - last,
        "mean_nodes_running": busy_threads(intervals, first, last),
        "critical_path_seconds": path_seconds,
        "critical_path": [nodes[node_id]["name"] for node_id in path],
        "shutdown_cpu_seconds": cpu_between(last, wall + 1.0),
        "cpu_seconds": cpu_between(0.0, wall + 1.0),
        "layers": dict(sorted(layers.items(), key=lambda item: item[1]["begin"])),
        "slowest": [{"node": node["name"], "seconds": node["seconds"], "cpu_seconds": node["cpu_seconds"],
                     "layer": node["layer"]} for _, node in slowest],
    }


def profiled_build(command: list[str], env: dict, target: Path) -> dict:
    samples: list[tuple[float, float]] = []
    started_epoch = time.time()
    result = measure(command, env, cpu_samples=samples)
    return {**asdict(result), **profile_build(target, samples, result.wall_seconds, started_epoch)}


# --------------------------------------------------------------------------------------------
# The two cases
# --------------------------------------------------------------------------------------------

def _fresh(*paths: Path):
    def prepare():
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    return prepare


def _uptime() -> str:
    """`uptime`'s line (load averages over 1, 5 and 15 minutes) when a case finished."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def dbt_env(workdir: Path, database: Path) -> dict:
    return {**os.environ, "IMR_DUCKDB_PATH": str(database), "DBT_TARGET_PATH": str(workdir / "target"),
            "DBT_LOG_PATH": str(workdir / "logs")}


def dbt_build_command(extra_vars: dict | None = None, marts: list[str] | None = None) -> list[str]:
    """The warehouse's `dbt build`, as `make warehouse` runs it (publish.BUILD_ARGS: models,
    seeds and data tests; the unit tests test the code and run in `make test`); with `marts`,
    only those marts and everything they are built from, with their data tests."""
    command = [DBT, "--no-use-colors", *BUILD_ARGS, "--profiles-dir", "profiles"]
    command += ["--select", " ".join(f"+{mart}" for mart in marts)] if marts else []
    return command + (["--vars", json.dumps(extra_vars)] if extra_vars else [])


# What the bundled scripts compute, as the warehouse's marts: yearly rates with exact limits
# (communes, regions, country), each commune against its region, the trends (three methods
# where the scripts fit one). Built alone they are the scripts' own work by the warehouse's
# rules, the rest of the warehouse (inequity, maps, screening, calibration...) left out.
SCRIPT_MARTS = ["fct_area_year_rates", "fct_commune_vs_region", "fct_trends"]
SCRIPT_MARTS_BUILD = "dbt build, the scripts' marts only"


# The name of the floor's contender in every case.
FLOOR = "dbt floor (no-op dbt ls)"


def dbt_floor(workdir: Path, extra_vars: dict | None = None) -> Contender:
    """dbt's no-op: `dbt ls` of one model with the build's profile and vars, in a folder of its own
    (its partial-parse file kept between runs, as the build's is; the build's file untouched), so
    it pays what every `dbt build` pays before its first node: dbt-core's imports, the parse, the
    artifacts."""
    database = workdir / "floor" / "floor.duckdb"
    command = [DBT, "--no-use-colors", "ls", "--select", "dim_commune", "--resource-type", "model",
               "--profiles-dir", "profiles"]
    command += ["--vars", json.dumps(extra_vars)] if extra_vars else []
    env = dbt_env(workdir / "floor", database)

    def parsed_once():
        # Untimed: the first `dbt ls` of a folder parses the whole project (13 s for the microdata
        # vars here), which a build reusing its parse never pays; with --repeat 1 it was the floor.
        if not (workdir / "floor" / "target" / "partial_parse.msgpack").exists():
            subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, check=True)

    return Contender(FLOOR, command, env, parsed_once)


def baseline(script: str, *arguments) -> list[str]:
    return [sys.executable, str(BASELINES / script), *map(str, arguments)]


def profile_case(workdir: Path, case: str, scale: float, years: str, log) -> dict:
    """The profiled `dbt build` of a case alone (`--profile-only`)."""
    log(f"{case}: one profiled dbt build")
    if case == "bundled":
        database = workdir / "bundled" / "build" / "infant_mortality.duckdb"
        _fresh(database)()
        return profiled_build(dbt_build_command(), dbt_env(workdir / "bundled" / "build", database),
                              workdir / "bundled" / "build" / "target")
    command, env, fresh_build = microdata_build(workdir, generate_microdata(
        workdir / f"microdata_scale_{scale:g}", scale, years, log), workdir / f"microdata_scale_{scale:g}")
    fresh_build()
    try:
        return profiled_build(command, env, workdir / "micro" / "target")
    finally:
        fresh_build()


def bundled_case(workdir: Path, repeat: int, log) -> dict:
    raw, out = REPO_ROOT / "data" / "raw", workdir / "script_output"
    database = workdir / "build" / "infant_mortality.duckdb"
    published = workdir / "published" / "infant_mortality.duckdb"
    database.parent.mkdir(parents=True, exist_ok=True)
    published.parent.mkdir(parents=True, exist_ok=True)
    build_env = dbt_env(workdir / "build", database)
    # FORCE=1: the sources have not changed between turns, and `make warehouse` alone would
    # answer "Up to date" in half a second (publish --if-changed) instead of rebuilding.
    publish = ["make", "--no-print-directory", "warehouse", "FORCE=1"]
    publish_env = dbt_env(workdir / "published", published)
    log("bundled: a first `make warehouse` so that every timed one rebuilds over a release")
    measure(publish, publish_env)
    contenders = [
        Contender("dbt build", dbt_build_command(), build_env, _fresh(database, database.with_suffix(".duckdb.wal"))),
        Contender("pandas script", baseline("bundled_pandas.py", raw, out), prepare=_fresh(out)),
        Contender(SCRIPT_MARTS_BUILD, dbt_build_command(marts=SCRIPT_MARTS), build_env,
                  _fresh(database, database.with_suffix(".duckdb.wal"))),
        Contender("make warehouse (rebuilt)", publish, publish_env),
        Contender("DuckDB script", baseline("bundled_duckdb.py", raw, out), prepare=_fresh(out)),
        dbt_floor(workdir),
    ]
    runs = alternate(contenders, repeat, log)
    _fresh(database)()
    profile = profiled_build(dbt_build_command(), build_env, workdir / "build" / "target")
    return {"repeat": repeat, "uptime": _uptime(),
            "runs": {name: [asdict(r) for r in measures] for name, measures in runs.items()},
            "ratios": ratio_rows(runs, "dbt build", ["pandas script", "DuckDB script"], FLOOR)
            + ratio_rows(runs, "make warehouse (rebuilt)", ["pandas script", "DuckDB script"], FLOOR)
            + ratio_rows(runs, SCRIPT_MARTS_BUILD, ["pandas script", "DuckDB script"], FLOOR),
            "profile": profile}


def generate_microdata(files: Path, scale: float, years: str, log) -> dict:
    manifest_path = files / "generation_manifest.json"
    options = json.loads(manifest_path.read_text())["options"] if manifest_path.exists() else {}
    if (options.get("scale"), options.get("years")) == (scale, years):
        log(f"microdata: reusing the generated files in {files}")
    else:
        shutil.rmtree(files, ignore_errors=True)
        log(f"microdata: generating scale {scale:g} into {files} (untimed)")
        measure([sys.executable, "-m", "infant_mortality.tools.generate_deis", "--out", str(files),
                 "--years", years, "--scale", str(scale), "--zip"])
    return json.loads(manifest_path.read_text())


def microdata_vars(workdir: Path, manifest: dict, files: Path) -> dict:
    return {"vital_source": "deis_microdata", "deis_deaths_path": str(files / manifest["deaths_file"]),
            "deis_births_path": str(files / manifest["births_folder"]),
            "deis_cache_dir": str(workdir / "micro" / "cache")}


def microdata_build(workdir: Path, manifest: dict, files: Path):
    """The microdata `dbt build` (command, environment) and what makes it fresh (file and cache)."""
    database, cache = workdir / "micro" / "build.duckdb", workdir / "micro" / "cache"
    database.parent.mkdir(parents=True, exist_ok=True)
    command = dbt_build_command(microdata_vars(workdir, manifest, files))
    return command, dbt_env(workdir / "micro", database), _fresh(database, database.with_suffix(".duckdb.wal"), cache)


def microdata_case(workdir: Path, scale: float, years: str, repeat: int, log) -> dict:
    files = workdir / f"microdata_scale_{scale:g}"
    manifest = generate_microdata(files, scale, years, log)
    deaths, births = files / manifest["deaths_file"], files / manifest["births_folder"]
    out = workdir / "micro_out"
    build, env, fresh_build = microdata_build(workdir, manifest, files)
    contenders = [
        Contender("dbt build", build, env, fresh_build),
        Contender("pandas counts script", baseline("microdata_pandas.py", deaths, births, out), prepare=_fresh(out)),
        Contender("DuckDB counts SQL", baseline("microdata_duckdb.py", deaths, births, out), prepare=_fresh(out)),
        Contender("DuckDB load of every column as text",
                  baseline("microdata_duckdb.py", deaths, births, out, "--load-all-as-text"), prepare=_fresh(out)),
        dbt_floor(workdir / "micro", microdata_vars(workdir, manifest, files)),
    ]
    runs = alternate(contenders, repeat, log)
    _fresh(out)()
    fresh_build()
    profile = profiled_build(build, env, workdir / "micro" / "target")
    fresh_build()
    return {"scale": scale, "records": manifest["records"], "repeat": repeat, "uptime": _uptime(),
            "runs": {name: [asdict(r) for r in measures] for name, measures in runs.items()},
            "ratios": ratio_rows(runs, "dbt build", [c.name for c in contenders[1:-1]], FLOOR),
            "profile": profile}


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

def _floor_cells(r: dict) -> str:
    """The floor and the ratios above it; blank for a row measured before the floor was."""
    if "floor_wall_seconds" not in r:
        return " | | |"
    return (f" {r['floor_wall_seconds']:.1f} | **{r['wall_ratio_above_floor']:.2f}x** | "
            f"{r['cpu_ratio_above_floor']:.2f}x |")


def _ratio_table(rows: list[dict]) -> str:
    lines = ["| warehouse | script | runs | warehouse wall s | script wall s | **wall ratio** | warehouse CPU s | "
             "script CPU s | CPU ratio | warehouse MB | script MB | load | dbt floor wall s | "
             "**wall ratio above floor** | CPU ratio above floor |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['warehouse']} | {r['script']} | {r['runs']} | {r['warehouse_wall_seconds']:.1f} | "
                     f"{r['script_wall_seconds']:.1f} | **{r['wall_ratio']:.2f}x** | {r['warehouse_cpu_seconds']:.1f} | "
                     f"{r['script_cpu_seconds']:.1f} | {r['cpu_ratio']:.2f}x | {r['warehouse_peak_rss_mb']:,.0f} | "
                     f"{r['script_peak_rss_mb']:,.0f} | {r['script_load_average']:.1f} |{_floor_cells(r)}")
    return "\n".join(lines)


def _profile_table(profile: dict) -> str:
    def busy(cpu, seconds):
        return f"{cpu / seconds:.2f}" if seconds > 0 else ""

    lines = ["| phase | from s | to s | wall s | CPU s | cores busy (of 2) | nodes | node-seconds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|",
             f"| dbt start-up (imports, parse, connect, plugins) | 0.0 | {profile['startup_seconds']:.1f} | "
             f"{profile['startup_seconds']:.1f} | {profile['startup_cpu_seconds']:.1f} | "
             f"{busy(profile['startup_cpu_seconds'], profile['startup_seconds'])} | | |"]
    for name, layer in profile["layers"].items():
        span = layer["end"] - layer["begin"]
        lines.append(f"| {name} | {layer['begin']:.1f} | {layer['end']:.1f} | {span:.1f} | {layer['cpu_seconds']:.1f} | "
                     f"| {layer['nodes']} | {layer['node_seconds']:.1f} |")
    lines.append(f"| all nodes | {profile['startup_seconds']:.1f} | {profile['startup_seconds'] + profile['nodes_seconds']:.1f} | "
                 f"{profile['nodes_seconds']:.1f} | {profile['nodes_cpu_seconds']:.1f} | "
                 f"{busy(profile['nodes_cpu_seconds'], profile['nodes_seconds'])} | | |")
    lines.append(f"| shut-down (artefacts, close) | {profile['wall_seconds'] - profile['shutdown_seconds']:.1f} | "
                 f"{profile['wall_seconds']:.1f} | {profile['shutdown_seconds']:.1f} | "
                 f"{profile.get('shutdown_cpu_seconds', float('nan')):.1f} | | | |")
    slowest = "\n".join(f"| {s['node']} | {s['layer']} | {s['seconds']:.2f} | {s.get('cpu_seconds', float('nan')):.2f} |"
                         for s in profile["slowest"])
    return (f"{chr(10).join(lines)}\n\nThe layers overlap in time (dbt runs any node whose inputs are ready); a layer's "
            f"CPU is that of its nodes, the CPU of each 0.2 s shared among the nodes running in it; "
            f"nodes ran {profile['mean_nodes_running']:.2f} at a time on average. Critical path (longest chain of "
            f"node times, a node waiting for its parents and their tests): **{profile['critical_path_seconds']:.1f} s** "
            f"of the {profile['nodes_seconds']:.1f} s the nodes took: {' -> '.join(profile['critical_path'])}.\n\n"
            f"Slowest nodes (wall: compile + execute, as dbt timed them; CPU: the build's CPU while the node ran, "
            f"shared with the nodes running beside it):\n\n| node | layer | wall s | CPU s |\n|---|---|---:|---:|\n{slowest}")


def render(results: dict) -> str:
    parts = [f"""## Against the analyst's script (`make bench-compare`)

Whole processes, run in turns on a shared machine; medians (runs per contender: column `runs`).
CPU = user + system seconds of the process and its children; MB = peak resident memory of the
largest process (`ru_maxrss`); load = the 1-minute load average when the script's runs started
(median). The machine has 2 cores: a load above 2 means other work competed for them, so wall
times are inflated and CPU seconds are the steadier figure. Scripts: `benchmarks/baselines/`.
dbt floor = the median of a no-op `dbt ls` of one model timed in the same turns (dbt-core's
start-up, which no `dbt build` can avoid); above floor = (warehouse - floor) / script.
**Machine:** {results['machine']}.
"""]
    if "bundled" in results:
        bundled = results["bundled"]
        parts.append(f"""### Bundled data (346 communes, 2010-2019)

The warehouse: `dbt build` on a fresh file (every model and test); `make warehouse` rebuilt over a
previous release (build, tests, Parquet export, atomic publish); `dbt build` of only the marts the
scripts compute ({", ".join(f"`{m}`" for m in SCRIPT_MARTS)}) and everything they are built from,
with their data tests, on a fresh file. The scripts: yearly rates with
exact limits for communes, regions and the country, each commune against its region (RR with the
exact conditional limits, RAP, RAP%) for the full window and two 5-year blocks, a GLSAR trend per
area and period.

{_ratio_table(bundled['ratios'])}

Load when the case finished: `{bundled['uptime']}`.

#### Where the seconds of the bundled `dbt build` go

{_profile_table(bundled['profile'])}
""")
    if "microdata" in results:
        micro = results["microdata"]
        records = micro["records"]
        parts.append(f"""### Generated national DEIS microdata, scale {micro['scale']:g} ({records['deaths'] + records['births']:,} records)

The warehouse: `dbt build` on a fresh file and an empty ZIP cache. The scripts: pandas reading
the 6 needed columns (`usecols`) and counting infant and neonatal deaths and births per commune
and year with exact limits; the same as one DuckDB SQL; DuckDB loading every column of every file
as text into a database file. Each script unpacks the ZIP itself (timed).

{_ratio_table(micro['ratios'])}

Load when the case finished: `{micro['uptime']}`.

#### Where the seconds of the microdata `dbt build` go

{_profile_table(micro['profile'])}
""")
    if NOTES.exists():
        parts.append(NOTES.read_text(encoding="utf-8"))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/bench_compare.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", choices=["bundled", "microdata"], default=["bundled", "microdata"])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each contender (default 5)")
    parser.add_argument("--scale", type=float, default=1.0, help="generator scale of the microdata case (default 1)")
    parser.add_argument("--years", default="1990-2019", help="years of the microdata (default 1990-2019)")
    parser.add_argument("--profile-only", action="store_true",
                        help="only the profiled dbt build of each case, replacing the profile of the previous run")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "bench" / "compare",
                        help="scratch folder (gitignored); generated files are kept there for the next run")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    parser.add_argument("--json", type=Path, default=REPO_ROOT / "benchmarks" / "compare.json")
    args = parser.parse_args(argv)

    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    def previous_results() -> dict:
        return json.loads(args.json.read_text()) if args.json.exists() else {}

    results = {case: previous_results()[case] for case in args.cases if args.profile_only}

    def log(message):
        print(message, flush=True)

    for case in args.cases:
        if args.profile_only:
            results[case]["profile"] = profile_case(workdir, case, args.scale, args.years, log)
        elif case == "bundled":
            results[case] = bundled_case(workdir / "bundled", args.repeat, log)
        else:
            results[case] = microdata_case(workdir, args.scale, args.years, args.repeat, log)
    # A run of some cases keeps the other cases' figures from the previous run (read now: a
    # run of the other case may have finished meanwhile).
    results = {**previous_results(), **results, "machine": machine_description()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    section = render(results)
    document = args.output.read_text(encoding="utf-8") if args.output.exists() else "# Benchmarks\n"
    args.output.write_text(replace_section(document, section), encoding="utf-8")
    print(section)
    print(f"written: {args.output}, {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
