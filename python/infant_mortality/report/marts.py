"""Reading the marts the report shows. The report computes no statistic: every number it shows
is a column of a mart (the few TEMPORARY fallbacks below cover warehouses built before the
mart that carries the number existed, and go when every build has it)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from infant_mortality.report.common import Combo, Indicator

DEFAULT_WAREHOUSE = Path("warehouse/infant_mortality.duckdb")
REQUIRED_MARTS = ("dim_commune", "fct_rates_commune_year", "fct_commune_vs_region", "fct_trends",
                  "audit_data_quality")
# Read when present: a warehouse built before them still gives a report.
OPTIONAL_MARTS = ("fct_area_period_rates", "meta_build", "dim_indicator", "fct_smoothed_rates")

# The dbt vars' defaults (dbt_project.yml), used only when the warehouse has no meta_build.
DEFAULT_THRESHOLDS = dict(unreliable_below_deaths=20, comparison_alpha=0.05, trend_p_threshold=0.05)


class ReportError(RuntimeError):
    """A problem the user can fix (missing warehouse, missing marts); printed without a traceback."""


@dataclass(frozen=True)
class Settings:
    """How the warehouse was built, as `marts.meta_build` records it."""

    unreliable_below_deaths: int = DEFAULT_THRESHOLDS["unreliable_below_deaths"]
    comparison_alpha: float = DEFAULT_THRESHOLDS["comparison_alpha"]
    trend_p_threshold: float = DEFAULT_THRESHOLDS["trend_p_threshold"]
    count_basis: str | None = None
    built_at: str | None = None
    git_commit: str | None = None
    from_meta_build: bool = False


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
    geojson: dict
    indicators: list[Indicator] = field(default_factory=list)
    present: set[str] = field(default_factory=set)


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

        rates = read("fct_rates_commune_year")
        comparison = read("fct_commune_vs_region")
        marts = Marts(
            warehouse=path,
            communes=read("dim_commune"),
            rates=rates,
            comparison=comparison,
            trends=read("fct_trends"),
            audit=read("audit_data_quality"),
            area_rates=(read("fct_area_period_rates") if "fct_area_period_rates" in present
                        else _pooled_area_rates(rates, comparison)),
            settings=_settings(read("meta_build") if "meta_build" in present else None, rates),
            smoothed=read("fct_smoothed_rates") if "fct_smoothed_rates" in present else pd.DataFrame(
                columns=["commune_code", "indicator", "period_start", "period_end"]),
            geojson=_geojson(comparison),
            indicators=_indicators(read("dim_indicator")) if "dim_indicator" in present else [],
            present=present,
        )
    finally:
        con.close()
    return marts


def _settings(meta: pd.DataFrame | None, rates: pd.DataFrame) -> Settings:
    if meta is None or meta.empty:
        bases = rates["count_basis"].dropna().unique().tolist()
        return Settings(count_basis="; ".join(bases) or None)
    row = meta.iloc[0].to_dict()
    values = json.loads(row.get("vars_json") or "{}")
    thresholds = {k: type(v)(values[k]) if values.get(k) is not None else v for k, v in DEFAULT_THRESHOLDS.items()}
    return Settings(**thresholds, count_basis=row.get("count_basis"), built_at=str(row.get("built_at") or "") or None,
                    git_commit=row.get("git_commit"), from_meta_build=True)


def _geojson(comparison: pd.DataFrame) -> dict:
    """The polygons of the compared communes, simplified for display (`infant_mortality.geo`)."""
    from infant_mortality.geo import communes_geojson

    names = comparison.drop_duplicates("commune_code").set_index("commune_code")["commune_name"].to_dict()
    return communes_geojson(sorted(names), names)


def _indicators(dim: pd.DataFrame) -> list[Indicator]:
    """`marts.dim_indicator` rows as the report names them (columns as the seed names them)."""
    def pick(row, *names):
        return next((row[n] for n in names if n in row and pd.notna(row[n])), "")

    out = []
    for row in dim.to_dict("records"):
        code = pick(row, "indicator", "indicator_code", "code")
        out.append(Indicator(code, pick(row, "abbreviation_es", "abbr_es"), pick(row, "name_en"),
                             pick(row, "abbreviation_en", "abbr_en"), pick(row, "age_range", "ages", "age_range_en")))
    return out


def _pooled_area_rates(rates: pd.DataFrame, comparison: pd.DataFrame) -> pd.DataFrame:
    """TEMPORARY, until `marts.fct_area_period_rates` is in every warehouse: each region's and
    the country's pooled rate over the analysis periods of `fct_commune_vs_region`, from their
    yearly rows (sum of deaths / sum of births, exact Poisson limits)."""
    from infant_mortality.poisson import poisson_ci

    periods = comparison[["indicator", "period_start", "period_end", "period_label"]].drop_duplicates()
    areas = rates[rates["area_level"].isin(["region", "country"])]
    out = []
    for p in periods.itertuples(index=False):
        sel = areas[(areas["indicator"] == p.indicator) & areas["year"].between(p.period_start, p.period_end)]
        for (level, code, name), g in sel.groupby(["area_level", "area_code", "area_name"]):
            deaths, births = float(g["deaths"].sum()), float(g["live_births"].sum())
            if g["deaths"].isna().any() or not births > 0:
                continue
            lower, upper = poisson_ci(deaths)
            out.append(dict(area_level=level, area_code=code, area_name=name, indicator=p.indicator,
                            period_start=p.period_start, period_end=p.period_end, period_label=p.period_label,
                            n_years=len(g), deaths=deaths, live_births=births, rate_per_1000=1000 * deaths / births,
                            ci95_lower=1000 * float(lower) / births, ci95_upper=1000 * float(upper) / births))
    return pd.DataFrame(out)


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
    keep = [
        (r.indicator in windows) and (int(r.period_start), int(r.period_end)) == windows[r.indicator]
        for r in trends[["indicator", "period_start", "period_end"]].itertuples()
    ]
    return trends[keep]


def trend_row(trends: pd.DataFrame, level: str, code: str, indicator: str) -> dict | None:
    rows = trends[(trends.area_level == level) & (trends.area_code == code) & (trends.indicator == indicator)]
    return None if rows.empty else rows.iloc[0].to_dict()
