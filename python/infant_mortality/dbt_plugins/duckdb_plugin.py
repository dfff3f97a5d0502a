"""dbt-duckdb plugin: registers the exact statistics of `poisson.py` as DuckDB functions.

SQL models then call, for example, `imr_poisson_lower(deaths, 0.95)`. The functions are
vectorised (Arrow batches), so a national build pays microseconds per row, not per call.
Tables built with them are plain tables: readers of the warehouse file need no UDFs.
"""

from __future__ import annotations

import importlib
import os
import threading

import numpy as np
import pyarrow as pa
from dbt.adapters.duckdb.plugins import BasePlugin


def _poisson():
    """`infant_mortality.statistics.poisson`, imported on first use: it imports scipy.stats, which
    takes 0.6 s, and the connection that registers these functions is opened before any model
    can start. The plugin imports it in a background thread instead (Plugin.initialize), while
    the first models run; a call that comes first waits for that import (Python's import lock)."""
    return importlib.import_module("infant_mortality.statistics.poisson")


def _overdispersion():
    """`infant_mortality.statistics.overdispersion`, imported on first use (it imports poisson)."""
    return importlib.import_module("infant_mortality.statistics.overdispersion")


def _proportions():
    """`infant_mortality.statistics.proportions`, imported on first use (it imports poisson)."""
    return importlib.import_module("infant_mortality.statistics.proportions")


def _as_float(column: pa.Array) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False).astype(float)


def _on_distinct_rows(compute, arrays: list[np.ndarray], extra: list):
    """`compute` (element-wise) on the distinct rows of its inputs only, spread back to every
    row: the same numbers of deaths and births recur across communes, years and periods, and an
    exact limit costs about a microsecond per value (fct_commune_deprivation: 209,200 rows, 0.13 s
    per call on every row, 0.01 s on the distinct ones)."""
    distinct, where = np.unique(np.column_stack(arrays), axis=0, return_inverse=True)
    return np.asarray(compute(*distinct.T, *extra))[where.reshape(-1)]


def _arrow_udf(compute, n_inputs: int, returns: str):
    """Wrap a numpy function of n_inputs columns so that a NULL in any input gives NULL."""

    def udf(*columns):
        arrays = [_as_float(c.cast(pa.float64())) for c in columns[:n_inputs]]
        extra = [c[0].as_py() for c in columns[n_inputs:]]  # constant arguments (levels)
        missing = np.zeros(len(arrays[0]), dtype=bool)
        for c in columns[:n_inputs]:
            missing |= c.is_null().to_numpy(zero_copy_only=False)
        safe = [np.where(missing, 1.0, a) for a in arrays]
        if returns == "VARCHAR":
            labels = np.asarray(_on_distinct_rows(compute, safe, extra), dtype=object)
            return pa.array(labels, mask=missing, type=pa.string())
        result = np.asarray(_on_distinct_rows(compute, safe, extra), dtype=float)
        result = np.where(np.isfinite(result), result, np.nan)
        return pa.array(result, mask=missing | np.isnan(result), type=pa.float64())

    # DuckDB reads the arity from the Python signature, so expose a fixed one.
    arity = {2: lambda a, b: udf(a, b), 3: lambda a, b, c: udf(a, b, c), 4: lambda a, b, c, d: udf(a, b, c, d),
             5: lambda a, b, c, d, e: udf(a, b, c, d, e)}
    return arity


FUNCTIONS = {
    # name: (numpy function, number of count inputs, takes a level argument, DuckDB return type)
    "imr_poisson_lower": (lambda d, level: _poisson().poisson_ci(d, level)[0], 1, True, "DOUBLE"),
    "imr_poisson_upper": (lambda d, level: _poisson().poisson_ci(d, level)[1], 1, True, "DOUBLE"),
    "imr_rate_ratio_lower": (lambda a, b, c, d, level: _poisson().rate_ratio_exact_ci(a, b, c, d, level)[0], 4,
                             True, "DOUBLE"),
    "imr_rate_ratio_upper": (lambda a, b, c, d, level: _poisson().rate_ratio_exact_ci(a, b, c, d, level)[1], 4,
                             True, "DOUBLE"),
    "imr_rate_ratio_midp": (lambda a, b, c, d: _poisson().rate_ratio_midp_p_value(a, b, c, d), 4, False, "DOUBLE"),
    "imr_rate_ratio_midp_lower": (lambda a, b, c, d, level: _poisson().rate_ratio_midp_limit(a, b, c, d, level, "lower"),
                                  4, True, "DOUBLE"),
    "imr_rate_ratio_midp_upper": (lambda a, b, c, d, level: _poisson().rate_ratio_midp_limit(a, b, c, d, level, "upper"),
                                  4, True, "DOUBLE"),
    # The exact (Clopper-Pearson) interval of a share x / n (fct_reducible_infant_deaths).
    "imr_binomial_lower": (lambda x, n, level: _proportions().clopper_pearson(x, n, level)[0], 2, True, "DOUBLE"),
    "imr_binomial_upper": (lambda x, n, level: _proportions().clopper_pearson(x, n, level)[1], 2, True, "DOUBLE"),
    "imr_funnel_category": (lambda d, e: _poisson().funnel_category(d, e), 2, False, "VARCHAR"),
    # tau2 is a per-region constant, passed as a column (the region's row of int_funnel_dispersion).
    "imr_funnel_category_adjusted": (lambda d, e, tau2: _overdispersion().adjusted_funnel_category(d, e, tau2),
                                     3, False, "VARCHAR"),
}


def register_functions(conn) -> None:
    """Create the `imr_*` functions on a DuckDB connection (also used by tests)."""
    for name, (compute, n_inputs, has_level, returns) in FUNCTIONS.items():
        params = ["DOUBLE"] * n_inputs + (["DOUBLE"] if has_level else [])
        conn.create_function(
            name,
            _arrow_udf(compute, n_inputs, returns)[len(params)],
            params,
            returns,
            type="arrow",
            null_handling="special",
            side_effects=False,
        )


def one_blas_thread() -> None:
    """Every BLAS of the process (numpy's OpenBLAS, and the one scipy loads when a model imports
    scipy.linalg) on one thread. dbt runs the Python models beside DuckDB and beside each other,
    and their matrix products are small (series of 10 to 30 years): OpenBLAS's second thread
    spins while it waits for work and takes the core the other nodes need. On 2 cores the
    joinpoint fits of int_trends (30 years of generated microdata) took 15.6 s of CPU with two
    BLAS threads and 4.6 s with one, results identical bit for bit (each element of a product is
    the same dot product whatever the threads)."""
    from threadpoolctl import threadpool_limits

    os.environ["OPENBLAS_NUM_THREADS"] = "1"   # a BLAS loaded later reads it when it loads
    threadpool_limits(limits=1, user_api="blas")   # those loaded already; kept until restored


class Plugin(BasePlugin):
    def initialize(self, plugin_config):
        one_blas_thread()
        threading.Thread(target=_poisson, name="imr-import-statistics", daemon=True).start()

    def configure_connection(self, conn):
        register_functions(conn)
