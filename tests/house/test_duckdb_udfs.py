"""The DuckDB functions the SQL models call give the same numbers as the Python functions."""

import duckdb
import numpy as np
import pytest

from infant_mortality.statistics import poisson
from infant_mortality.dbt_plugins.duckdb_plugin import register_functions


@pytest.fixture
def con():
    connection = duckdb.connect()
    register_functions(connection)
    yield connection
    connection.close()


def test_poisson_udfs_match_python_and_keep_nulls(con):
    rows = con.execute(
        "select d, imr_poisson_lower(d, 0.95), imr_poisson_upper(d, 0.95) "
        "from (values (0), (3), (41), (null)) t(d) order by d nulls last"
    ).fetchall()
    for d, lower, upper in rows[:3]:
        expected = poisson.poisson_ci(d)
        assert (lower, upper) == pytest.approx(expected, rel=1e-12)
    assert rows[3][1:] == (None, None)


def test_rate_ratio_udfs_and_infinite_upper_limit_becomes_null(con):
    lower, upper, p = con.execute(
        "select imr_rate_ratio_lower(41, 28010, 15, 19017, 0.95), "
        "imr_rate_ratio_upper(41, 28010, 15, 19017, 0.95), imr_rate_ratio_midp(41, 28010, 15, 19017)"
    ).fetchone()
    assert (lower, upper) == pytest.approx((1.005684, 3.609300), abs=1e-6)
    assert p == pytest.approx(float(poisson.rate_ratio_midp_p_value(41, 28010, 15, 19017)))
    assert con.execute("select imr_rate_ratio_upper(3, 100, 0, 100, 0.95)").fetchone()[0] is None


def test_udfs_work_on_many_rows_at_once(con):
    deaths = np.arange(0, 5000)
    con.register("counts", {"d": deaths})
    got = np.array(con.execute("select imr_poisson_upper(d, 0.95) from counts order by d").fetchall())[:, 0]
    np.testing.assert_allclose(got, poisson.poisson_ci(deaths)[1], rtol=1e-12)


def test_funnel_category_udf_is_the_python_rule(con):
    rows = con.execute(
        "select imr_funnel_category(o, e) from (values (151, 106.44297), (150, 119.56955), (8, 6.23986), "
        "(159, 232.9329), (null, 3.0)) t(o, e)"
    ).fetchall()
    assert [r[0] for r in rows] == ["above_99_8", "above_95", "within", "below_99_8", None]



def test_repeated_rows_get_the_values_of_each_row(con):
    """Each function computes once per distinct row of its inputs and spreads the results back:
    on 20,000 rows of repeated counts (with zeros and NULLs) in random order, every row gets
    exactly what the Python function gives for that row alone."""
    rng = np.random.default_rng(17)
    n = 20_000
    d1, d2 = rng.poisson(3, n).astype(float), rng.poisson(5, n).astype(float)
    n1, n2 = rng.choice([900.0, 1000.0, 1200.0], n), rng.choice([1000.0, 2000.0], n)
    unknown = rng.random(n) < 0.1
    con.register("pairs", {"i": np.arange(n), "d1": d1, "n1": n1, "d2": d2, "n2": n2,
                           "d1_or_null": np.where(unknown, np.nan, d1)})
    got = con.execute(
        "select imr_poisson_lower(nullif(d1_or_null, 'nan'::double), 0.95), imr_poisson_upper(d1, 0.95), "
        "imr_rate_ratio_lower(d1, n1, d2, n2, 0.95), imr_rate_ratio_midp(d1, n1, d2, n2), "
        "imr_funnel_category(d1, n1 / 400) from pairs order by i").fetchall()
    assert [row[0] is None for row in got] == unknown.tolist()
    for i in rng.choice(n, 300, replace=False):
        lower, upper, ratio_lower, midp, category = got[i]
        if not unknown[i]:
            assert lower == poisson.poisson_ci(d1[i])[0]
        assert upper == poisson.poisson_ci(d1[i])[1]
        expected_ratio = float(poisson.rate_ratio_exact_ci(d1[i], n1[i], d2[i], n2[i])[0])
        assert ratio_lower == (expected_ratio if np.isfinite(expected_ratio) else None)
        assert midp == float(poisson.rate_ratio_midp_p_value(d1[i], n1[i], d2[i], n2[i]))
        assert category == poisson.funnel_category(np.array([d1[i]]), np.array([n1[i] / 400]))[0]


def test_the_plugin_leaves_every_blas_on_one_thread_once_statistics_are_imported():
    # In a fresh interpreter, as dbt loads the plugin: numpy's BLAS (loaded before) and the one
    # scipy brings (loaded when a model first imports scipy.linalg, after) each run one thread.
    import subprocess
    import sys

    script = """
import threading, threadpoolctl
before = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
from infant_mortality.dbt_plugins.duckdb_plugin import Plugin
Plugin("imr_stats", {})
next(t for t in threading.enumerate() if t.name == "imr-import-statistics").join()
import scipy.linalg  # loads scipy's own BLAS, after the limit
after = [(i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
print(before, after)
assert len(after) >= 2 and all(n == 1 for _, n in after), after
"""
    env = {**__import__("os").environ, "OPENBLAS_NUM_THREADS": "", "OMP_NUM_THREADS": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr + result.stdout
