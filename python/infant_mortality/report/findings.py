"""The text alternative of each figure: one or two sentences stating what it shows for its default
option (the region's rate and trend, the highest communes, those outside the funnel), written from
the marts' values and classes as they are (nothing is recomputed; the communes are ordered by the
mart's `rank_in_region`). The page puts each in the figure's caption, where screen readers and
everyone else read it."""

from __future__ import annotations

import pandas as pd

from infant_mortality.report.combos import Combo, with_rate
from infant_mortality.report.formats import fmt, fmt_apc, fmt_ci, unit
from infant_mortality.report.labels import indicator_short, trend_has_class, trend_label
from infant_mortality.report.i18n import t

TOP_N = 3  # communes named as the highest


def _names(df: pd.DataFrame) -> str:
    return ", ".join(df["commune_name"]) if len(df) else t("finding.none")


def _area_rate(reg: dict | None) -> str:
    if reg is None:
        return t("finding.no_rate")
    return t("finding.rate", rate=fmt(reg["rate_per_1000"]), ci=fmt_ci(reg["ci95_lower"], reg["ci95_upper"]),
             unit=unit(reg["indicator"]))


def ranking_finding(comparison: pd.DataFrame, combo: Combo, region_name: str, reg: dict | None) -> str:
    df = with_rate(combo.select(comparison)).sort_values("rank_in_region")
    top = ", ".join(f"{r.commune_name} ({fmt(r.rate_per_1000)})" for r in df.head(TOP_N).itertuples())
    return t("finding.ranking", combo=combo.label, region=region_name, rate=_area_rate(reg), top=top or t("finding.none"),
             n_hi=int((df["comparison"] == "higher").sum()), n_lo=int((df["comparison"] == "lower").sum()),
             n=len(df))


def trends_finding(area_name: str, indicator: str, area_trend: dict | None, member_trends: pd.DataFrame,
                   members: str) -> str:
    """The reference area's trend, and how many of its members (communes, regions) are in each class."""
    counts = member_trends["trend"].fillna("not_estimable").value_counts()
    classes = "; ".join(f"{trend_label(cls).lower()}: {int(counts[cls])}" for cls in
                        ("increasing", "decreasing", "stationary", "not_estimable", "insufficient_data")
                        if cls in counts)
    if area_trend is None:
        head = t("finding.trend_none", area=area_name, ind=indicator_short(indicator))
    else:
        head = t("finding.trend", area=area_name, ind=indicator_short(indicator),
                 period=f"{int(area_trend['period_start'])}-{int(area_trend['period_end'])}",
                 cls=trend_label(area_trend["trend"]).lower(),
                 apc=fmt_apc(area_trend) if trend_has_class(area_trend) else t("apc.none"))
    return head + " " + t("finding.trend_members", members=members, classes=classes or t("finding.none"))


def funnel_finding(comparison: pd.DataFrame, combo: Combo, region_name: str, reg: dict | None) -> str:
    df = with_rate(combo.select(comparison)).sort_values("rank_in_region")
    by = {cat: df[df["funnel_category"] == cat] for cat in ("above_99_8", "above_95", "below_95", "below_99_8")}
    return t("finding.funnel", combo=combo.label, region=region_name, rate=_area_rate(reg),
             above_998=_names(by["above_99_8"]), above_95=_names(by["above_95"]),
             below_95=_names(by["below_95"]), below_998=_names(by["below_99_8"]))


def map_finding(comparison: pd.DataFrame, combo: Combo, region_name: str, significant: list[str],
                exceeding: list[str] | None, cut: float) -> str:
    df = with_rate(combo.select(comparison)).sort_values("rank_in_region")
    text = t("finding.map", combo=combo.label, region=region_name, top=_names(df.head(TOP_N)),
             outlined=", ".join(significant) or t("finding.none"))
    if exceeding is not None:
        text += " " + t("finding.map_exceeding", cut=fmt(cut), names=", ".join(exceeding) or t("finding.none"))
    return text


def inequity_finding(inequality: pd.DataFrame, level: str, code: str, area_name: str, indicator: str,
                     stratifier: str, stratifier_label: str, gap: str) -> str:
    rows = inequality[(inequality["area_level"] == level) & (inequality["area_code"] == code)
                      & (inequality["indicator"] == indicator) & (inequality["stratifier"] == stratifier)
                      & (inequality["period_kind"] == "full_window")].set_index("measure")
    parts = []
    for m in ("RII", "SII"):
        if m in rows.index:
            r = rows.loc[m]
            parts.append(f"{m} {fmt(r['estimate'])} ({fmt_ci(r['ci95_lower'], r['ci95_upper'])})")
    return t("finding.inequity", area=area_name, ind=indicator_short(indicator), strat=stratifier_label,
             measures="; ".join(parts) or t("finding.none"), gap=gap or t("finding.none"))
