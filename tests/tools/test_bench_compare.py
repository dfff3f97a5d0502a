"""The helpers of the side-by-side benchmark (`make bench-compare`, benchmarks/bench_compare.py) and
of its baseline scripts: how runs are measured, alternated and summarised, how the critical
path of a build is found, and that the baselines' statistics match published values. The
benchmark itself is not a test (it takes minutes and depends on the machine's load)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import REPO_ROOT

# The benchmark harness and its baselines are scripts beside their results (benchmarks/), not
# part of the installed package.
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
sys.path.insert(0, str(REPO_ROOT / "benchmarks" / "baselines"))
from bench import keep_other_sections, marked_section, replace_section  # noqa: E402
from bench_compare import (Contender, Measure, _ratio_table, alternate, attribute_cpu, busy_threads,  # noqa: E402
                           critical_path, measure, medians, ratio_rows)
from common import exact_limits, rest_of_region_limits  # noqa: E402


def _m(wall, cpu=1.0, mb=100.0, load=1.0):
    return Measure(wall_seconds=wall, cpu_seconds=cpu, peak_rss_mb=mb, load_average=load)


def test_medians_and_ratios_of_alternated_runs():
    runs = {"dbt build": [_m(10, 12, 600), _m(30, 13, 620), _m(11, 14, 610)],
            "pandas script": [_m(2, 2, 200), _m(5, 3, 180), _m(4, 2.5, 190), _m(3, 2.6, 210)]}
    medians_ours = medians(runs["dbt build"])
    assert (medians_ours["wall_seconds"], medians_ours["cpu_seconds"], medians_ours["peak_rss_mb"]) == (11, 13, 610)
    [row] = ratio_rows(runs, "dbt build", ["pandas script"])
    # An even number of runs: the median is the mean of the middle two (3 and 4 s; 2.5 and 2.6 s).
    assert row["script_wall_seconds"] == 3.5 and row["script_cpu_seconds"] == pytest.approx(2.55)
    assert row["wall_ratio"] == pytest.approx(11 / 3.5)
    assert row["cpu_ratio"] == pytest.approx(13 / 2.55)
    assert row["memory_ratio"] == pytest.approx(610 / 195)
    assert row["runs"] == 4


def test_ratios_above_dbt_floor_subtract_the_floor_median_from_the_warehouse():
    # Hand computation: warehouse medians 11 s wall, 13 s CPU; floor medians 4 s wall (3, 4, 6)
    # and 3.5 s CPU; script medians 3.5 s wall, 2.55 s CPU.
    runs = {"dbt build": [_m(10, 12), _m(30, 13), _m(11, 14)],
            "floor": [_m(3, 3.0), _m(6, 4.0), _m(4, 3.5)],
            "pandas script": [_m(2, 2), _m(5, 3), _m(4, 2.5), _m(3, 2.6)]}
    [row] = ratio_rows(runs, "dbt build", ["pandas script"], floor="floor")
    assert (row["floor_wall_seconds"], row["floor_cpu_seconds"]) == (4, 3.5)
    assert row["wall_ratio"] == pytest.approx(11 / 3.5)  # the whole ratio is unchanged
    assert row["wall_ratio_above_floor"] == pytest.approx((11 - 4) / 3.5)
    assert row["cpu_ratio_above_floor"] == pytest.approx((13 - 3.5) / 2.55)
    [without] = ratio_rows(runs, "dbt build", ["pandas script"])
    assert "wall_ratio_above_floor" not in without


def test_the_ratio_table_shows_the_floor_and_leaves_it_blank_for_older_rows():
    runs = {"dbt build": [_m(11, 13)], "floor": [_m(4, 3.5)], "pandas script": [_m(3.5, 2.55)]}
    [row] = ratio_rows(runs, "dbt build", ["pandas script"], floor="floor")
    [older] = ratio_rows(runs, "dbt build", ["pandas script"])
    header, _, new, old = _ratio_table([row, older]).splitlines()
    assert header.count("|") == new.count("|") == old.count("|")
    assert new.endswith("| 4.0 | **2.00x** | 3.73x |")  # (11 - 4) / 3.5 and (13 - 3.5) / 2.55
    assert old.endswith("| | |")


def test_contenders_alternate_and_reverse_every_other_round():
    order = []
    contenders = [Contender(name, [sys.executable, "-c", "pass"], prepare=lambda name=name: order.append(name))
                  for name in ("warehouse", "pandas", "duckdb")]
    runs = alternate(contenders, repeat=3, log=lambda message: None)
    assert order == ["warehouse", "pandas", "duckdb", "duckdb", "pandas", "warehouse",
                     "warehouse", "pandas", "duckdb"]
    assert {name: len(r) for name, r in runs.items()} == {"warehouse": 3, "pandas": 3, "duckdb": 3}


def test_measure_counts_the_cpu_and_memory_of_children():
    # The child starts a grandchild that burns ~0.3 s of CPU and holds ~200 MB. measure() runs in
    # a fresh interpreter, as `make bench-compare` runs it: Linux reports, as a child's peak
    # memory, at least what its parent held when it started it, and a test worker that has built
    # warehouses holds a gigabyte.
    grandchild = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); t = time.process_time()\n" \
                 "while time.process_time() - t < 0.3: pass"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}], check=True)"
    harness = (f"import json, sys; sys.path[:0] = [{str(REPO_ROOT / 'benchmarks')!r}]\n"
               f"from bench_compare import measure\n"
               f"print(json.dumps(measure([sys.executable, '-c', {child!r}]).__dict__))")
    ran = subprocess.run([sys.executable, "-c", harness], capture_output=True, text=True, check=True)
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["cpu_seconds"] >= 0.3
    assert result["wall_seconds"] >= result["cpu_seconds"] * 0.5
    assert 200 <= result["peak_rss_mb"] < 1000


def test_measure_stops_on_a_failing_command():
    with pytest.raises(SystemExit, match="exit 3"):
        measure([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])


def test_critical_path_waits_for_the_tests_of_parents_only():
    nodes = {
        "model.a": {"seconds": 1.0, "parents": []},
        "model.b": {"seconds": 2.0, "parents": ["model.a"]},
        "model.c": {"seconds": 1.0, "parents": ["model.b"]},
        "model.side": {"seconds": 3.5, "parents": []},
        # A test of a alone gates b (dbt build runs b after a's tests)...
        "test.not_null_a": {"seconds": 5.0, "parents": ["model.a"]},
        # ...a relationship test between a and b gates nothing (it needs b itself).
        "test.relationship_a_b": {"seconds": 20.0, "parents": ["model.a", "model.b"]},
        "test.sibling_of_a": {"seconds": 0.5, "parents": ["model.a"]},
    }
    seconds, path = critical_path(nodes)
    # a (1) -> not_null (5) -> b (2) -> relationship (20) = 28 beats the same chain ending in c (9).
    assert (seconds, path) == (28.0, ["model.a", "test.not_null_a", "model.b", "test.relationship_a_b"])
    del nodes["test.relationship_a_b"]
    assert critical_path(nodes) == (9.0, ["model.a", "test.not_null_a", "model.b", "model.c"])


def test_busy_threads_is_the_mean_number_of_nodes_running():
    # 0-4 s: one node; 2-4 s: a second; 4-6 s: none -> (4 + 2) / 6 = 1.
    assert busy_threads([(0, 4), (2, 4)], 0, 6) == pytest.approx(1.0)
    assert busy_threads([(-1, 10)], 0, 5) == pytest.approx(1.0)  # clipped to the window


def test_the_compare_section_is_replaced_in_place_and_kept_by_the_scale_report():
    appended = replace_section("# Benchmarks\n\nscale table\n", "## Against the script\nfirst")
    assert appended.startswith("# Benchmarks\n\nscale table\n\n<!-- bench-compare: start -->")
    assert marked_section(appended) == "## Against the script\nfirst"
    replaced = replace_section(appended + "\nafter\n", "## Against the script\nsecond")
    assert marked_section(replaced) == "## Against the script\nsecond"
    assert replaced.count("bench-compare: start") == 1 and "scale table" in replaced and replaced.endswith("after\n")
    assert marked_section("# no section") == ""


def test_baseline_exact_limits_match_the_methods_test_vectors():
    # docs/methods/core.md, "Interval for one rate" (count scale); births 1000 so the rate per 1000 is the count.
    lower, upper = exact_limits(pd.Series([0, 1, 3, 10, 41]), pd.Series([1000] * 5))
    np.testing.assert_allclose(lower, [0, 0.025318, 0.618672, 4.795389, 29.422308], atol=1e-6)
    np.testing.assert_allclose(upper, [3.688879, 5.571643, 8.767273, 18.390356, 55.621130], atol=1e-6)


def test_baseline_rate_ratio_limits_match_stata_iri():
    # Stata `iri 41 15 28010 19017` (docs/methods/comparisons.md, "A commune against its region"): exact 95% CI 1.005684-3.609300. The
    # commune holds the 41 deaths, the rest of its region the 15.
    frame = pd.DataFrame({"deaths": [41], "births": [28010], "deaths_region": [56], "births_region": [47027]})
    lower, upper = rest_of_region_limits(frame)
    np.testing.assert_allclose([lower[0], upper[0]], [1.005684, 3.609300], atol=1e-6)


def test_cpu_is_shared_among_the_nodes_running_when_it_was_used():
    # Cumulative CPU sampled at 0, 1, 2, 3 s: 1 s of CPU in each second.
    samples = [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]
    shares = attribute_cpu(samples, {"a": (0.0, 2.0), "b": (1.0, 2.0), "idle": (5.0, 6.0)})
    # 0-1 s: a alone (1 s); 1-2 s: a and b share 1 s; 2-3 s: nothing ran (not shared).
    assert shares == pytest.approx({"a": 1.5, "b": 0.5, "idle": 0.0})


def test_make_bench_keeps_the_other_marked_sections_of_benchmarks_md():
    """`make bench` rewrites BENCHMARKS.md; a section kept by hand between its own markers (the new
    user's `make warehouse` timings) survives it, as bench-compare's does."""
    kept = "<!-- new-user: start -->\n## make warehouse as a new user waits\n90 s\n<!-- new-user: end -->"
    previous = replace_section(f"# Benchmarks\n\nold table\n\n{kept}\n", "## Against the script\nfirst")
    report = replace_section("# Benchmarks\n\nnew table\n", marked_section(previous))
    document = keep_other_sections(report, previous)
    assert "new table" in document and "old table" not in document
    assert document.count(kept) == 1 and marked_section(document) == "## Against the script\nfirst"
    assert keep_other_sections(document, previous) == document
