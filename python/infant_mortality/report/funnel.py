"""3. Funnel plot: each commune's pooled rate against its live births, with the exact Poisson
95% / 99.8% control limits around the region's pooled rate (`marts.fct_funnel_limits`) and the
mart's funnel category."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from infant_mortality.report.combos import (
    apply_default_visibility,
    combos_of,
    frames_by_combo,
    menu,
    visibility,
    with_rate,
)
from infant_mortality.report.formats import fmt, fmt_ci, nums, unit
from infant_mortality.report.labels import funnel_label
from infant_mortality.report.style import (
    ASSUMED_WIDTH,
    FUNNEL_COLOURS,
    FUNNEL_SYMBOLS,
    base_layout,
    legend_below,
    narrow_layout,
    place_labels,
    scatter,
)
from infant_mortality.report.i18n import t
from infant_mortality.report.marts import pooled_rate
from infant_mortality.statistics.poisson import FUNNEL_BIRTHS_SPAN

HEIGHT = 620
# The funnel's limits: exact Poisson, or widened for the region's over-dispersion (Spiegelhalter
# 2005; fct_funnel_limits.adjusted_*, fct_commune_vs_region.funnel_category_adjusted): (column
# prefix of the limits, category column).
LIMIT_KINDS = {"exact": ("", "funnel_category"), "adjusted": ("adjusted_", "funnel_category_adjusted")}
MARGIN = dict(l=70, r=30, t=110, b=125)
LABEL_FONT_PX = 10


PLOT_W = ASSUMED_WIDTH - MARGIN["l"] - MARGIN["r"]
PLOT_H = HEIGHT - MARGIN["t"] - MARGIN["b"]


def axis_spans(df: pd.DataFrame, region_rate) -> tuple[float, float, float]:
    """(lowest births, highest births, top of the rate axis): the births axis spans the mart's
    births grid; the rate axis stops a little above the highest commune (or the region)."""
    births = df["live_births"].to_numpy(float)
    low, high = FUNNEL_BIRTHS_SPAN
    lo, hi = max(1.0, float(np.nanmin(births)) * low), float(np.nanmax(births)) * high
    y_top = 1.12 * float(np.nanmax(np.r_[df["rate_per_1000"].to_numpy(float), (region_rate or 0) * 1.5]))
    return lo, hi, y_top


def add_limits(fig: go.Figure, curve: pd.DataFrame, combo, kind: str, region_rate: float, lo: float, hi: float,
               region_code: str) -> list[int]:
    """The 95% and 99.8% limits of the kind asked and the region's rate; the traces' indexes."""
    prefix = LIMIT_KINDS[kind][0]
    grid = curve["live_births"].to_numpy(float)
    idx = []
    for level, column, dash, name in ((0.95, "95", "dash", t("funnel.limits_95")),
                                      (0.998, "998", "dot", t("funnel.limits_998"))):
        lower = curve[f"{prefix}lower_{column}_per_1000"].to_numpy(float)
        upper = curve[f"{prefix}upper_{column}_per_1000"].to_numpy(float)
        idx.append(len(fig.data))
        fig.add_trace(scatter(
            x=nums(grid) + [None] + nums(grid), y=nums(upper) + [None] + nums(lower), mode="lines",
            line=dict(color="#555", dash=dash, width=1.3), name=name, legendgroup=name, hoverinfo="skip",
            meta=dict(figure="funnel", region_code=region_code, combo=combo.key, level=level, limits=kind)))
    idx.append(len(fig.data))
    fig.add_trace(scatter(
        x=[lo, hi], y=[region_rate, region_rate], mode="lines", line=dict(color="#222", width=1.5),
        name=t("funnel.region"),
        hovertemplate=t("funnel.region.hover", rate=fmt(region_rate), unit=unit(combo.indicator)) + "<extra></extra>",
        meta=dict(figure="funnel", region_code=region_code, combo=combo.key, region_rate=region_rate, limits=kind)))
    return idx


def label_positions(df: pd.DataFrame, lo: float, hi: float, y_top: float) -> list[str]:
    """Where each labelled commune's name goes, from pixel positions at the usual width. Without
    a rate axis (no commune and no region rate above 0) the names keep their default place."""
    lx0, lx1 = math.log10(lo), math.log10(hi)
    x_px = (np.log10(df["live_births"].to_numpy(float).clip(min=1)) - lx0) / (lx1 - lx0) * PLOT_W
    rates = df["rate_per_1000"].to_numpy(float)
    y_px = rates / y_top * PLOT_H if y_top > 0 else np.full(len(rates), np.nan)
    labelled = ~df["funnel_category"].isin(["within", "uncategorised"]).to_numpy()
    names = [n if keep else "" for n, keep in zip(df["commune_name"], labelled)]
    return place_labels(x_px.tolist(), y_px.tolist(), names, [9.0] * len(df), (0, PLOT_W, 0, PLOT_H),
                        font_px=LABEL_FONT_PX)


def add_categories(fig: go.Figure, df: pd.DataFrame, combo, kind: str, region_code: str) -> list[int]:
    """One trace per funnel category of the communes (with `_pos`, their labels' places); their indexes."""
    # Only the columns drawn: selecting rows and iterating them costs per column.
    df = df[["commune_name", "funnel_category", "_pos", "live_births", "deaths", "rate_per_1000", "ci95_lower",
             "ci95_upper", "rate_ratio"]]
    idx = []
    for cat in FUNNEL_COLOURS:
        sub = df[df["funnel_category"] == cat]
        if sub.empty:
            continue
        idx.append(len(fig.data))
        hover = [
            t("funnel.hover", name=r.commune_name, combo=combo.label, rate=fmt(r.rate_per_1000),
              unit=unit(combo.indicator), ci=fmt_ci(r.ci95_lower, r.ci95_upper),
              deaths=fmt(r.deaths, 0, thousands=True), births=fmt(r.live_births, 0, thousands=True),
              rt=fmt(r.rate_ratio), category=funnel_label(cat).lower())
            for r in sub.itertuples()
        ]
        with_text = cat not in ("within", "uncategorised")
        open_symbol = FUNNEL_SYMBOLS[cat].endswith("-open")
        fig.add_trace(scatter(
            x=nums(sub["live_births"]), y=nums(sub["rate_per_1000"]),
            mode="markers+text" if with_text else "markers", name=funnel_label(cat), legendgroup=cat,
            marker=dict(color=FUNNEL_COLOURS[cat], size=10, symbol=FUNNEL_SYMBOLS[cat],
                        line=dict(width=1.4 if open_symbol else 0.8, color=FUNNEL_COLOURS[cat] if open_symbol else "#333")),
            text=sub["commune_name"].tolist(), textposition=sub["_pos"].tolist(),
            textfont=dict(size=LABEL_FONT_PX, color=FUNNEL_COLOURS[cat]),
            hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
            meta=dict(figure="funnel", region_code=region_code, combo=combo.key, funnel_category=cat, limits=kind,
                      **({"narrow": {"mode": "markers"}} if with_text else {}))))
    return idx


def option_layout(combo, kind: str, curve: pd.DataFrame, region_name: str, lo: float, hi: float,
                  y_top: float) -> dict:
    """The relayout of one option: its title (with the region's over-dispersion for adjusted
    limits) and axis ranges."""
    dispersion = "" if kind == "exact" or curve.empty else t(
        "funnel.dispersion", phi=fmt(curve["phi"].iloc[0]), tau2=fmt(curve["tau2"].iloc[0], 4))
    return {"title.text": t(f"funnel.title.{kind}", combo=combo.label, region=region_name, dispersion=dispersion),
            "xaxis.range": [math.log10(lo), math.log10(hi)], "yaxis.range": [0, y_top]}


def add_option(fig: go.Figure, comparison: pd.DataFrame, area_periods: pd.DataFrame, limits: pd.DataFrame, combo,
               kind: str, region_name: str, region_code: str) -> tuple[list[int], dict]:
    """The traces of one combo and kind of limits: (their indexes, the option's relayout);
    `comparison` and `limits` hold the combo's rows."""
    category = LIMIT_KINDS[kind][1]
    df = with_rate(comparison)
    df = df.assign(funnel_category=df[category].fillna("uncategorised"))
    reg = pooled_rate(area_periods, combo)
    region_rate = reg["rate_per_1000"] if reg is not None else None
    lo, hi, y_top = axis_spans(df, region_rate)
    curve = limits.sort_values("grid_point")
    idx = []
    if region_rate is not None and not curve.empty:
        idx += add_limits(fig, curve, combo, kind, region_rate, lo, hi, region_code)
    df = df.assign(_pos=label_positions(df, lo, hi, y_top))
    # The farthest from the region first: report.js hides a name that would overlap an earlier one.
    df = df.assign(_far=(df["rate_per_1000"] - (region_rate or 0)).abs() * df["live_births"].pow(0.5))
    df = df.sort_values("_far", ascending=False)
    idx += add_categories(fig, df, combo, kind, region_code)
    return idx, option_layout(combo, kind, curve, region_name, lo, hi, y_top)


def funnel_figure(comparison: pd.DataFrame, area_periods: pd.DataFrame, limits: pd.DataFrame, region_name: str,
                  region_code: str) -> go.Figure:
    """Pooled rate against live births with exact Poisson 95% / 99.8% limits around the region,
    or (menu) the limits adjusted for over-dispersion with the communes' adjusted categories.

    Communes outside the 95% limits are labelled; each label takes the side of its marker that
    overlaps least with the other labels and markers (at the report's usual width). The
    vertical axis stops a little above the highest commune so the limits of tiny communes do
    not squash the plot. On a phone the labels are hidden (hover or tap shows the name).
    """
    combos = combos_of(comparison)
    by_combo, limits_by_combo = frames_by_combo(comparison), frames_by_combo(limits)
    fig = go.Figure()
    groups, layouts, labels = [], [], []
    for combo, kind in [(c, k) for c in combos for k in LIMIT_KINDS]:
        idx, layout = add_option(fig, by_combo[combo], area_periods, limits_by_combo.get(combo, limits.iloc[:0]), combo,
                                 kind, region_name, region_code)
        groups.append(idx)
        layouts.append(layout)
        labels.append(t(f"funnel.option.{kind}", combo=combo.label))
    visibilities = visibility(groups, len(fig.data))
    apply_default_visibility(fig, visibilities[0])
    fig.update_layout(
        **base_layout(
            height=HEIGHT,
            margin=MARGIN,
            title=dict(text=layouts[0]["title.text"], xref="paper", x=0, xanchor="left", y=1 - 12 / HEIGHT,
                       yanchor="top", font=dict(size=15)),
            xaxis=dict(type="log", title=dict(text=t("funnel.xaxis")), showline=True,
                       linecolor="#999", ticks="outside", range=layouts[0]["xaxis.range"]),
            yaxis=dict(title=dict(text=t("funnel.yaxis", unit=unit(c.indicator for c in combos))), zeroline=False,
                       range=layouts[0]["yaxis.range"]),
        )
    )
    legend_below(fig)
    fig.layout.meta = dict(menu=menu(labels, visibilities, layouts), menu_label=t("menu.funnel"),
                           narrow=narrow_layout({"margin.l": 50, "margin.b": 150}))
    return fig
