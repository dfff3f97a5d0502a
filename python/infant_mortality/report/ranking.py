"""1. Ranking: every commune's pooled rate with its exact 95% interval against the region."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from infant_mortality.report.combos import apply_default_visibility, combos_of, menu, visibility, with_rate
from infant_mortality.report.formats import fmt, num, nums, unit
from infant_mortality.report.labels import comparison_label
from infant_mortality.report.style import (
    COMPARISON_COLOURS,
    COMPARISON_SYMBOLS,
    base_layout,
    legend_below,
    narrow_layout,
    scatter,
)
from infant_mortality.report.i18n import t
from infant_mortality.report.marts import Settings, pooled_rate

RANKING_CUSTOMDATA = (
    "commune_name ci95_lower ci95_upper deaths live_births rate_ratio rate_ratio_ci95_lower "
    "rate_ratio_ci95_upper excess_rate_per_1000 attributable_percent p_value comparison_text "
    "rank_in_region n_years"
).split()


def add_combo_traces(fig: go.Figure, df: pd.DataFrame, combo, n_communes: int, region_code: str) -> list[int]:
    """One trace per comparison class of the combo's communes (`df`, sorted by rate); their indexes."""
    idx = []
    for comp in ("higher", "similar", "lower", "untested"):
        sub = df[df["comparison"] == comp].sort_values("is_unreliable", kind="stable")
        if sub.empty:
            continue
        rate = sub["rate_per_1000"].to_numpy(float)
        idx.append(len(fig.data))
        fig.add_trace(
            scatter(
                x=nums(rate),
                y=sub["commune_name"].tolist(),
                mode="markers",
                name=comparison_label(comp),
                legendgroup=comp,
                marker=dict(
                    color=COMPARISON_COLOURS[comp],
                    size=9,
                    symbol=[COMPARISON_SYMBOLS[comp] + ("-open" if u else "") for u in sub["is_unreliable"]],
                    line=dict(width=1.5, color=COMPARISON_COLOURS[comp]),
                ),
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=nums(sub["ci95_upper"].to_numpy(float) - rate),
                    arrayminus=nums(rate - sub["ci95_lower"].to_numpy(float)),
                    color=COMPARISON_COLOURS[comp],
                    thickness=1.3,
                    width=0,
                ),
                customdata=[
                    [num(v) if not isinstance(v, str) else v for v in row]
                    for row in sub[RANKING_CUSTOMDATA].itertuples(index=False)
                ],
                hovertemplate=t("ranking.hover", n=n_communes, combo=combo.label, unit=unit(combo.indicator)),
                meta=dict(figure="ranking", region_code=region_code, combo=combo.key, comparison=comp),
            )
        )
    return idx


def region_marks(reg: dict | None) -> tuple[list, list]:
    """The region's pooled rate (dashed line, labelled) and its 95% CI (grey band): (shapes, annotations)."""
    if reg is None:
        return [], []
    shapes = [
        dict(type="rect", xref="x", yref="paper", x0=reg["ci95_lower"], x1=reg["ci95_upper"], y0=0, y1=1,
             fillcolor="rgba(0,0,0,0.07)", line=dict(width=0), layer="below"),
        dict(type="line", xref="x", yref="paper", x0=reg["rate_per_1000"], x1=reg["rate_per_1000"], y0=0, y1=1,
             line=dict(color="#222", width=1.5, dash="dash")),
    ]
    annotations = [
        dict(xref="x", yref="paper", x=reg["rate_per_1000"], y=1.0, yanchor="bottom", showarrow=False,
             text=t("ranking.region_line", rate=fmt(reg["rate_per_1000"])), font=dict(size=12))
    ]
    return shapes, annotations


def add_legend_keys(fig: go.Figure, settings: Settings) -> list[int]:
    """Legend-only keys for the symbols that are not traces of their own; their indexes."""
    legend_idx = [len(fig.data)]
    fig.add_trace(scatter(x=[None], y=[None], mode="lines", name=t("ranking.legend.region"),
                          line=dict(color="#222", dash="dash"), hoverinfo="skip",
                          meta=dict(figure="ranking", legend_only=True)))
    legend_idx.append(len(fig.data))
    fig.add_trace(scatter(x=[None], y=[None], mode="markers",
                          name=t("ranking.legend.unreliable", n=settings.unreliable_below_deaths),
                          marker=dict(symbol="circle-open", color="#555", size=8), hoverinfo="skip",
                          meta=dict(figure="ranking", legend_only=True)))
    return legend_idx


def lay_out(fig: go.Figure, first: dict, n_communes: int, rate_unit: str) -> None:
    """The figure's layout, drawn with its first option (`first`: that option's relayout)."""
    height = max(420, 17 * n_communes + 200)
    fig.update_layout(
        **base_layout(
            height=height,
            margin=dict(l=160, r=30, t=110, b=125),
            title=dict(text=first["title.text"], xref="paper", x=0, xanchor="left", y=1 - 12 / height,
                       yanchor="top", font=dict(size=15)),
            xaxis=dict(title=dict(text=t("ranking.xaxis", unit=rate_unit)),
                       rangemode="tozero", zeroline=False, side="bottom", showline=True, linecolor="#999",
                       mirror=False, ticks="outside"),
            yaxis=dict(type="category", categoryorder="array", categoryarray=first["yaxis.categoryarray"],
                       automargin=True, tickfont=dict(size=11), showgrid=True, gridcolor="#f0f0f0"),
            shapes=first["shapes"],
            annotations=first["annotations"],
        )
    )
    legend_below(fig)


def ranking_figure(comparison: pd.DataFrame, area_periods: pd.DataFrame, region_name: str, region_code: str,
                   settings: Settings) -> go.Figure:
    """Caterpillar plot: every commune's pooled rate and 95% CI, sorted, against the region.

    `comparison`: the region's rows of `marts.fct_commune_vs_region`; `area_periods`: the
    region's rows of `marts.fct_area_period_rates` (its pooled rate per indicator and period).
    """
    combos = combos_of(comparison)
    fig = go.Figure()
    groups, layouts, labels = [], [], []
    n_communes = comparison["commune_code"].nunique()
    for combo in combos:
        df = with_rate(combo.select(comparison)).sort_values("rate_per_1000")
        df = df.assign(comparison=df["comparison"].fillna("untested"))
        df = df.assign(comparison_text=[t(f"comparison.short.{c}") for c in df["comparison"]])
        groups.append(add_combo_traces(fig, df, combo, n_communes, region_code))
        shapes, annotations = region_marks(pooled_rate(area_periods, combo))
        labels.append(combo.label)
        layouts.append({"title.text": t("ranking.title", combo=combo.label, region=region_name,
                                        unit=unit(combo.indicator)),
                        "yaxis.categoryarray": df["commune_name"].tolist(), "shapes": shapes,
                        "annotations": annotations})
    legend_idx = add_legend_keys(fig, settings)
    visibilities = visibility(groups, len(fig.data), always=legend_idx)
    apply_default_visibility(fig, visibilities[0])
    rate_unit = unit(c.indicator for c in combos)
    lay_out(fig, layouts[0], n_communes, rate_unit)
    fig.layout.meta = dict(menu=menu(labels, visibilities, layouts), menu_label=t("menu.combo"),
                           narrow=narrow_layout({"margin.l": 8, "margin.b": 170, "yaxis.tickfont.size": 9,
                                                 "xaxis.title.text": t("ranking.xaxis.narrow", unit=rate_unit)}))
    return fig
