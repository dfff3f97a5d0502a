"""The country against UN IGME (`marts.fct_external_benchmarks`): per year the national rate with
its exact interval beside IGME's estimate and the 2015 round's 90% band, as a small figure and a
table; every number is the mart's."""

from __future__ import annotations

import pandas as pd

from infant_mortality.report.formats import fmt, fmt_ci, nums, unit
from infant_mortality.report.labels import indicator_short
from infant_mortality.report.style import base_layout, narrow_layout
from infant_mortality.report.i18n import t

IGME_COLOUR, COUNTRY_COLOUR = "#0072B2", "#222222"


def benchmark_rows(benchmarks: pd.DataFrame, indicator: str) -> pd.DataFrame:
    return benchmarks[benchmarks["indicator"] == indicator].sort_values("year")


def benchmark_figure(rows: pd.DataFrame, indicator: str) -> dict:
    """Plain plotly dict: the country's yearly rate (points, CI whiskers), IGME's (line and
    diamonds), the 2015 round's 90% band (shaded)."""
    years = [int(y) for y in rows["year"]]
    rate = rows["country_rate_per_1000"].astype(float)
    band = rows.dropna(subset=["igme_2015_round_lower_90", "igme_2015_round_upper_90"])  # the 2015 round's years
    band_years = [int(y) for y in band["year"]]
    data = [
        dict(type="scatter", x=band_years + band_years[::-1],
             y=nums(band["igme_2015_round_upper_90"]) + nums(band["igme_2015_round_lower_90"][::-1]),
             mode="lines", fill="toself", fillcolor="rgba(0,114,178,0.15)", line=dict(width=0), hoverinfo="skip",
             name=t("bench.trace.band"), meta=dict(figure="benchmarks", kind="band")),
        dict(type="scatter", x=years, y=nums(rows["igme_rate_per_1000"]), mode="lines+markers",
             line=dict(color=IGME_COLOUR, width=2, dash="dash"), marker=dict(symbol="diamond", size=8),
             name=t("bench.trace.igme"), hovertemplate="%{x}: %{y:.2f}<extra>UN IGME</extra>",
             meta=dict(figure="benchmarks", kind="igme")),
        dict(type="scatter", x=years, y=nums(rate), mode="markers", marker=dict(color=COUNTRY_COLOUR, size=8),
             error_y=dict(type="data", symmetric=False, array=nums(rows["country_ci95_upper"].astype(float) - rate),
                          arrayminus=nums(rate - rows["country_ci95_lower"].astype(float)), color="#777", width=3),
             name=t("bench.trace.country", ind=indicator_short(indicator)),
             hovertemplate="%{x}: %{y:.2f}<extra></extra>", meta=dict(figure="benchmarks", kind="country")),
    ]
    layout = base_layout(height=380, margin=dict(l=55, r=20, t=50, b=90),
                         title=dict(text=t("bench.title", ind=indicator_short(indicator)), x=0, xref="paper",
                                    font=dict(size=15)),
                         xaxis=dict(dtick=2, showline=True, linecolor="#bbb"),
                         yaxis=dict(rangemode="tozero", title=dict(text=t("per_1000.short", unit=unit(indicator)))),
                         legend=dict(orientation="h", x=0, y=-0.15, yanchor="top"))
    layout["meta"] = dict(narrow=narrow_layout({"margin.l": 45, "height": 420, "legend.y": -0.2}))
    return dict(data=data, layout=layout)


def benchmark_table_rows(rows: pd.DataFrame) -> list[list]:
    out = []
    for r in rows.to_dict("records"):
        within = r["is_deaths_within_tolerance"]
        out.append([
            str(int(r["year"])),
            [f"{fmt(r['country_rate_per_1000'])} ({fmt_ci(r['country_ci95_lower'], r['country_ci95_upper'])})",
             r["country_rate_per_1000"]],
            [fmt(r["igme_rate_per_1000"]), r["igme_rate_per_1000"]],
            f"{fmt(r['igme_2015_round_lower_90'])} – {fmt(r['igme_2015_round_upper_90'])}",
            [fmt(r["rate_difference_per_1000"], signed=True), r["rate_difference_per_1000"]],
            [fmt(r["deaths_difference"], 0, signed=True, thousands=True), r["deaths_difference"]],
            [fmt(r["deaths_difference_percent"], 1, signed=True), r["deaths_difference_percent"]],
            "" if within is None or pd.isna(within) else t("yes") if within else t("no"),
        ])
    return out


BENCHMARK_HEADERS = ("col.year", "bench.col.country", "bench.col.igme", "bench.col.band", "bench.col.rate_difference",
                     "bench.col.deaths_difference", "bench.col.deaths_difference_percent", "bench.col.within")


def benchmark_finding(rows: pd.DataFrame, indicator: str) -> str:
    diff = rows["rate_difference_per_1000"].dropna()
    outside = rows[rows["is_deaths_within_tolerance"] == False]  # noqa: E712 (null: not compared)
    return t("bench.finding", first=int(rows["year"].min()), last=int(rows["year"].max()),
             lo=fmt(diff.min(), signed=True), hi=fmt(diff.max(), signed=True), n=len(outside), unit=unit(indicator),
             years=", ".join(str(int(y)) for y in outside["year"]) or t("finding.none"))
