"""Reading the marts the report shows. The report computes no statistic: every number it shows
is a column of a mart, and the thresholds it states are the build's (`marts.meta_build`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from infant_mortality.report.combos import Combo
from infant_mortality.report.context import Indicator

DEFAULT_WAREHOUSE = Path("warehouse/infant_mortality.duckdb")
REQUIRED_MARTS = ("dim_commune", "dim_indicator", "fct_area_year_rates", "fct_area_period_rates",
                  "fct_commune_vs_region", "fct_funnel_limits", "fct_trends", "fct_smoothed_rates", "audit_data_quality", "meta_build",
                  "dim_stratifier", "fct_rates_by_quintile", "fct_commune_deprivation", "fct_inequality",
                  "fct_inequality_trends", "fct_trend_segments", "fct_commune_screening", "fct_external_benchmarks",
                  "fct_study_findings", "fct_bym2_rates", "fct_spatial_clusters")

# The dbt vars the report states (their values are the build's, from meta_build.vars_json).
THRESHOLD_VARS = {"unreliable_below_deaths": int, "comparison_alpha": float, "trend_p_threshold": float,
                  "trend_min_deaths": int, "cluster_fdr_alpha": float}


class ReportError(RuntimeError):
    """A problem the user can fix (missing warehouse, missing marts); printed without a traceback."""


@dataclass(frozen=True)
class Settings:
    """How the warehouse was built, as `marts.meta_build` records it."""

    unreliable_below_deaths: int
    comparison_alpha: float
    trend_p_threshold: float
    trend_min_deaths: int
    exceedance_probability_threshold: float
    cluster_fdr_alpha: float  # the false discovery rate at which fct_spatial_clusters names a cluster
    trend_method: str = ""  # fct_trends.method of the headline (meta_build)
    trend_method_label: str = ""
    trend_ci_level: float = 0.95
    count_basis: str | None = None
    built_at: str | None = None
    git_commit: str | None = None


@dataclass
class Marts:
    warehouse: Path
    communes: pd.DataFrame
    rates: pd.DataFrame
    comparison: pd.DataFrame
    trends: pd.DataFrame
    audit: pd.DataFrame
    area_rates: pd.DataFrame
    settings: Settings
    smoothed: pd.DataFrame
    funnel_limits: pd.DataFrame
    geojson: dict
    inequity: dict[str, pd.DataFrame]
    indicators: list[Indicator]
    other_trends: pd.DataFrame  # fct_trends of the second method shown beside the headline's
    segments: pd.DataFrame  # fct_trend_segments
    screening: pd.DataFrame  # fct_commune_screening of the headline method
    benchmarks: pd.DataFrame  # fct_external_benchmarks
    study_findings: pd.DataFrame  # fct_study_findings
    bym2: pd.DataFrame  # fct_bym2_rates
    clusters: pd.DataFrame  # fct_spatial_clusters


def default_warehouse() -> Path:
    return Path(os.environ.get("IMR_DUCKDB_PATH") or DEFAULT_WAREHOUSE)


def load_marts(warehouse: str | os.PathLike) -> Marts:
    """Every mart the report uses, read into pandas; the file is opened read-only and closed."""
    path = Path(warehouse)
    if not path.is_file():
        raise ReportError(
            f"warehouse not found: {path}\n"
            "Build it first with `make warehouse` (or point --warehouse / IMR_DUCKDB_PATH at a built DuckDB file)."
        )
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise ReportError(f"cannot open the warehouse {path} read-only: {exc}") from exc
    try:
        present = {
            name
            for (name,) in con.execute(
                "select table_name from information_schema.tables where table_schema = 'marts'"
            ).fetchall()
        }
        missing = [m for m in REQUIRED_MARTS if m not in present]
        if missing:
            raise ReportError(
                f"the warehouse {path} has no marts.{', marts.'.join(missing)}; rebuild it with `make warehouse`."
            )

        def read(name: str) -> pd.DataFrame:
            return con.execute(f"select * from marts.{name}").df()

        rates = read("fct_area_year_rates")
        comparison = read("fct_commune_vs_region")
        settings = _settings(read("meta_build"))
        trends = read("fct_trends")
        marts = Marts(
            warehouse=path,
            communes=read("dim_commune"),
            rates=rates,
            comparison=comparison,
            # fct_trends holds one row per method; the report shows the build's headline method.
            trends=trends[trends["method"] == settings.trend_method].reset_index(drop=True),
            audit=read("audit_data_quality"),
            area_rates=read("fct_area_period_rates"),
            settings=settings,
            smoothed=read("fct_smoothed_rates"),
            funnel_limits=read("fct_funnel_limits"),
            geojson=_geojson(comparison),
            inequity={name: read(name) for name in ("dim_stratifier", "fct_rates_by_quintile",
                                                     "fct_commune_deprivation", "fct_inequality",
                                                     "fct_inequality_trends")},
            indicators=_indicators(read("dim_indicator")),
            other_trends=trends[trends["method"] == second_method(settings.trend_method)].reset_index(drop=True),
            segments=read("fct_trend_segments"),
            screening=read("fct_commune_screening").query("is_headline_method").reset_index(drop=True),
            benchmarks=read("fct_external_benchmarks"),
            study_findings=read("fct_study_findings"),
            bym2=read("fct_bym2_rates"),
            clusters=read("fct_spatial_clusters"),
        )
    finally:
        con.close()
    return marts


def _settings(meta: pd.DataFrame) -> Settings:
    if meta.empty:
        raise ReportError("marts.meta_build is empty: the warehouse was not built completely; rebuild it.")
    row = meta.iloc[0].to_dict()
    values = json.loads(row.get("vars_json") or "{}")
    missing = [k for k in THRESHOLD_VARS if values.get(k) is None]
    missing += [c for c in ("trend_method", "exceedance_probability_threshold") if row.get(c) is None]
    if missing:
        raise ReportError(f"marts.meta_build has no {', '.join(missing)}: the warehouse was "
                          "built by an older version; rebuild it with `make warehouse`.")
    thresholds = {k: cast(values[k]) for k, cast in THRESHOLD_VARS.items()}
    return Settings(**thresholds, trend_method=row["trend_method"], trend_method_label=row["trend_method_label"],
                    trend_ci_level=float(row["trend_ci_level"]),
                    exceedance_probability_threshold=float(row["exceedance_probability_threshold"]),
                    count_basis=row.get("count_basis"),
                    built_at=str(row.get("built_at") or "") or None, git_commit=row.get("git_commit") or None)


def second_method(headline: str) -> str:
    """The trend method shown beside the headline's: the study's Prais-Winsten beside the count
    model (fct_trends.methods_disagreeing names every method that classes a series otherwise)."""
    return "poisson" if headline != "poisson" else "prais_winsten"


def _geojson(comparison: pd.DataFrame) -> dict:
    """The polygons of the compared communes, simplified for display (`infant_mortality.geography.display`)."""
    from infant_mortality.geography.display import communes_geojson

    names = comparison.drop_duplicates("commune_code").set_index("commune_code")["commune_name"].to_dict()
    return communes_geojson(sorted(names), names)


def _indicators(dim: pd.DataFrame) -> list[Indicator]:
    """`marts.dim_indicator` rows, in its order, as the report names them."""
    dim = dim.sort_values("sort_order", na_position="last")
    return [Indicator(r["indicator"], r["abbreviation_es"] or r["indicator"].upper(), r["name_es"] or r["indicator"],
                      r["ages_es"] or "", r["abbreviation_en"] or r["indicator"].upper(),
                      r["name_en"] or r["indicator"], r["ages_en"] or "", int(r["multiplier"]))
            for r in dim.to_dict("records")]


def pooled_rate(area_periods: pd.DataFrame, combo: Combo) -> dict | None:
    """The area's row of `fct_area_period_rates` for the combo's indicator and period."""
    if area_periods is None or area_periods.empty:
        return None
    rows = combo.select(area_periods)
    return None if rows.empty else rows.iloc[0].to_dict()


def trend_windows(trends: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Per indicator, the trend window the report shows: the widest (then the latest)."""
    out = {}
    for ind, g in trends.groupby("indicator"):
        w = g[["period_start", "period_end"]].drop_duplicates()
        w = w.assign(span=w.period_end - w.period_start).sort_values(["span", "period_end"], ascending=False)
        out[ind] = (int(w.iloc[0].period_start), int(w.iloc[0].period_end))
    return out


def trends_in_window(trends: pd.DataFrame, windows: dict) -> pd.DataFrame:
    keep = np.array([
        (r.indicator in windows) and (int(r.period_start), int(r.period_end)) == windows[r.indicator]
        for r in trends[["indicator", "period_start", "period_end"]].itertuples()
    ], dtype=bool)
    # A boolean array, not a list: an empty list would select no *columns* (the report then
    # failed on a warehouse without joinpoint segments).
    return trends[keep]


def trend_row(trends: pd.DataFrame, level: str, code: str, indicator: str) -> dict | None:
    rows = trends[(trends.area_level == level) & (trends.area_code == code) & (trends.indicator == indicator)]
    return None if rows.empty else rows.iloc[0].to_dict()


AREA_KEY = ["area_level", "area_code", "indicator"]


class RowsByArea:
    """The rows of a frame per (area_level, area_code, indicator), as a boolean mask per area
    would select them: the frame is grouped once, where masks in a loop over the areas scanned
    all of it each time."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        self.positions = df.groupby(AREA_KEY, sort=False).indices if len(df) else {}

    def get(self, key: tuple, default=None) -> pd.DataFrame | None:
        pos = self.positions.get(key)
        return default if pos is None else self.df.take(pos)

    def first(self, key: tuple) -> dict | None:
        """The area's first row as a dict, as `trend_row` gives it; None when it has none."""
        pos = self.positions.get(key)
        return None if pos is None else self.df.iloc[pos[0]].to_dict()
