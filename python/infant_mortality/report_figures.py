"""Plotly figures of the HTML report (``infant_mortality.report``), built from the marts.

Every builder takes plain pandas DataFrames read from the marts and returns a
``plotly.graph_objects.Figure``. Numbers are passed to plotly as Python lists (never numpy
arrays, which plotly would encode as base64 typed arrays), so the figure JSON embedded in the
report is readable and the tests can check the values against the marts. Each trace carries a
``meta`` dict (region, indicator, period, ...) naming what it shows.

A figure that shows several indicators / periods holds the traces of all of them and a
dropdown toggling their visibility; the first option is the default (the full window of the
first indicator present).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from infant_mortality.poisson import funnel_count_limits

# code -> (Spanish abbreviation, English name, English abbreviation, ages at death)
INDICATORS: dict[str, tuple[str, str, str, str]] = {
    "imr": ("TMI", "infant mortality", "IMR", "under 1 year"),
    "nmr": ("TMN", "neonatal mortality", "NMR", "0-27 days"),
    "enmr": ("TMNP", "early neonatal mortality", "ENMR", "0-6 days"),
    "pnmr": ("TMIT", "post-neonatal (late infant) mortality", "PNMR", "28 days to under 1 year"),
}

COMPARISON_COLOURS = {"higher": "#c62828", "lower": "#1565c0", "similar": "#8c8c8c"}
COMPARISON_LABELS = {
    "higher": "Significantly higher than the rest of the region",
    "lower": "Significantly lower than the rest of the region",
    "similar": "No significant difference",
}
FUNNEL_COLOURS = {
    "above_99_8": "#b2182b",
    "above_95": "#ef8a62",
    "within": "#9e9e9e",
    "below_95": "#67a9cf",
    "below_99_8": "#2166ac",
}
FUNNEL_LABELS = {
    "above_99_8": "Above the 99.8% limit",
    "above_95": "Above the 95% limit",
    "within": "Within the limits",
    "below_95": "Below the 95% limit",
    "below_99_8": "Below the 99.8% limit",
}
TREND_COLOURS = {
    "increasing": "#c62828",
    "decreasing": "#1565c0",
    "stationary": "#757575",
    "not_estimable": "#bdbdbd",
}
TREND_LABELS = {
    "increasing": "Increasing",
    "decreasing": "Decreasing",
    "stationary": "Stationary",
    "not_estimable": "Not estimable",
}
FONT = dict(family="DejaVu Sans, Arial, Helvetica, sans-serif", size=13, color="#222")


def indicator_short(indicator: str) -> str:
    """`TMI (IMR)`: the Spanish abbreviation with the English one."""
    es, _, en, _ = INDICATORS.get(indicator, (indicator.upper(), indicator, indicator.upper(), ""))
    return f"{es} ({en})"


def indicator_long(indicator: str) -> str:
    """`TMI, infant mortality rate (IMR)`."""
    es, name, en, _ = INDICATORS.get(indicator, (indicator.upper(), indicator, indicator.upper(), ""))
    return f"{es}, {name} rate ({en})"


def indicator_order(indicators) -> list[str]:
    known = [i for i in INDICATORS if i in set(indicators)]
    return known + sorted(set(indicators) - set(known))


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def _num(x):
    """A JSON-friendly float (None for missing / non-finite)."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _nums(values) -> list:
    return [_num(v) for v in values]


def _int(x):
    v = _num(x)
    return None if v is None else int(round(v))


def fmt(x, digits: int = 2, signed: bool = False, thousands: bool = False) -> str:
    """Plain-text number; an en dash for missing values."""
    v = _num(x)
    if v is None:
        return "–"
    spec = ("+" if signed else "") + ("," if thousands else "") + f".{digits}f"
    return format(v, spec).replace("-", "−")


def fmt_p(p) -> str:
    v = _num(p)
    if v is None:
        return "–"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def fmt_apc(row) -> str:
    """`APC −2.9% (−4.1; −1.7)` or the trend's reason when it has no APC."""
    if row is None:
        return "trend not available"
    apc = _num(row.get("apc"))
    if apc is None:
        return "APC not estimable"
    return (
        f"APC {fmt(apc, 1, signed=True)}% "
        f"(95% CI {fmt(row.get('apc_ci95_lower'), 1, signed=True)}; {fmt(row.get('apc_ci95_upper'), 1, signed=True)})"
    )


@dataclass(frozen=True)
class Combo:
    """One indicator over one analysis period: one option of a figure's dropdown."""

    indicator: str
    period_start: int
    period_end: int

    @property
    def period_label(self) -> str:
        return f"{self.period_start}-{self.period_end}"

    @property
    def key(self) -> str:
        return f"{self.indicator}|{self.period_start}|{self.period_end}"

    @property
    def label(self) -> str:
        return f"{indicator_short(self.indicator)} · {self.period_label}"

    def select(self, df: pd.DataFrame) -> pd.DataFrame:
        return df[
            (df["indicator"] == self.indicator)
            & (df["period_start"] == self.period_start)
            & (df["period_end"] == self.period_end)
        ]


def combos_of(comparison: pd.DataFrame) -> list[Combo]:
    """Indicator x period combinations present; per indicator the widest period first."""
    out = []
    for ind in indicator_order(comparison["indicator"].unique()):
        periods = comparison.loc[comparison["indicator"] == ind, ["period_start", "period_end"]].drop_duplicates()
        periods = periods.assign(span=periods.period_end - periods.period_start).sort_values(
            ["span", "period_end", "period_start"], ascending=[False, False, True]
        )
        out += [Combo(ind, int(r.period_start), int(r.period_end)) for r in periods.itertuples()]
    return out


def _dropdown(labels: list[str], visibilities: list[list[bool]], layouts: list[dict]) -> list[dict]:
    """A plotly updatemenu toggling trace visibility (and layout) per option; none for one option."""
    if len(labels) <= 1:
        return []
    buttons = [
        dict(label=lab, method="update", args=[{"visible": vis}, lay])
        for lab, vis, lay in zip(labels, visibilities, layouts)
    ]
    return [
        dict(
            type="dropdown",
            buttons=buttons,
            active=0,
            direction="down",
            showactive=True,
            x=1.0,
            xanchor="right",
            y=1.0,
            yanchor="bottom",
            pad=dict(b=28),
            bgcolor="#f5f5f5",
            font=dict(size=12),
        )
    ]


def _base_layout(**kw) -> dict:
    layout = dict(
        template="plotly_white",
        font=FONT,
        hoverlabel=dict(font=dict(family=FONT["family"], size=12)),
        legend=dict(orientation="h", x=0, xanchor="left", y=-0.04, yanchor="top"),
    )
    layout.update(kw)
    return layout


def _legend_below(fig: go.Figure, px: int = 62) -> None:
    """Horizontal legend `px` pixels below the plot area (below the x-axis title)."""
    m = fig.layout.margin
    plot_h = (fig.layout.height or 450) - (m.t or 0) - (m.b or 0)
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-px / max(plot_h, 1), yanchor="top"))


def _visibility(groups: list[list[int]], n_traces: int, always: list[int] = ()) -> list[list[bool]]:
    out = []
    for idx in groups:
        vis = [False] * n_traces
        for i in list(idx) + list(always):
            vis[i] = True
        out.append(vis)
    return out


def _apply_default_visibility(fig: go.Figure, visible: list[bool]) -> None:
    for trace, vis in zip(fig.data, visible):
        trace.visible = vis


# --------------------------------------------------------------------------------------------
# 1. Ranking
# --------------------------------------------------------------------------------------------


def region_pooled(region_rates: pd.DataFrame, combo: Combo) -> dict:
    """The region's pooled rate over the combo's years from its own yearly rows (sum/sum)."""
    from infant_mortality.poisson import poisson_ci

    rows = region_rates[
        (region_rates["indicator"] == combo.indicator)
        & region_rates["year"].between(combo.period_start, combo.period_end)
    ]
    deaths = float(rows["deaths"].sum(min_count=1)) if len(rows) else float("nan")
    births = float(rows["live_births"].sum(min_count=1)) if len(rows) else float("nan")
    if not (births > 0):
        return dict(deaths=None, live_births=None, rate=None, lower=None, upper=None)
    lower, upper = poisson_ci(deaths)
    return dict(
        deaths=deaths,
        live_births=births,
        rate=1000 * deaths / births,
        lower=1000 * float(lower) / births,
        upper=1000 * float(upper) / births,
    )


RANKING_CUSTOMDATA = (
    "commune_name ci95_lower ci95_upper deaths live_births rate_ratio rate_ratio_ci95_lower "
    "rate_ratio_ci95_upper excess_rate_per_1000 attributable_percent p_value comparison "
    "rank_in_region n_years"
).split()


def ranking_figure(comparison: pd.DataFrame, region_rates: pd.DataFrame, region_name: str, region_code: str) -> go.Figure:
    """Caterpillar plot: every commune's pooled rate and 95% CI, sorted, against the region."""
    combos = combos_of(comparison)
    fig = go.Figure()
    groups, layouts, labels = [], [], []
    n_communes = comparison["commune_code"].nunique()
    for combo in combos:
        df = combo.select(comparison).sort_values("rate_per_1000")
        order = df["commune_name"].tolist()
        idx = []
        for comp in ("higher", "similar", "lower"):
            sub = df[df["comparison"] == comp].sort_values("is_unreliable", kind="stable")
            if sub.empty:
                continue
            rate = sub["rate_per_1000"].to_numpy(float)
            idx.append(len(fig.data))
            fig.add_trace(
                go.Scatter(
                    x=_nums(rate),
                    y=sub["commune_name"].tolist(),
                    mode="markers",
                    name=COMPARISON_LABELS[comp],
                    legendgroup=comp,
                    marker=dict(
                        color=COMPARISON_COLOURS[comp],
                        size=8,
                        symbol=["circle-open" if u else "circle" for u in sub["is_unreliable"]],
                        line=dict(width=1.5, color=COMPARISON_COLOURS[comp]),
                    ),
                    error_x=dict(
                        type="data",
                        symmetric=False,
                        array=_nums(sub["ci95_upper"].to_numpy(float) - rate),
                        arrayminus=_nums(rate - sub["ci95_lower"].to_numpy(float)),
                        color=COMPARISON_COLOURS[comp],
                        thickness=1.3,
                        width=0,
                    ),
                    customdata=[
                        [_num(v) if not isinstance(v, str) else v for v in row]
                        for row in sub[RANKING_CUSTOMDATA].itertuples(index=False)
                    ],
                    hovertemplate=(
                        "<b>%{customdata[0]}</b> (rank %{customdata[12]} of " + str(n_communes) + ")<br>"
                        + combo.label
                        + ": %{x:.2f} per 1000 live births<br>95% CI %{customdata[1]:.2f} to %{customdata[2]:.2f}"
                        "<br>deaths %{customdata[3]:,} / live births %{customdata[4]:,} (%{customdata[13]} years)"
                        "<br>RT (rate ratio) %{customdata[5]:.2f} (95% CI %{customdata[6]:.2f} to %{customdata[7]:.2f})"
                        "<br>RAP (excess rate) %{customdata[8]:+.2f} per 1000 · RAP% %{customdata[9]:+.1f}%"
                        "<br>vs rest of region: %{customdata[11]} (mid-p %{customdata[10]:.3f})<extra></extra>"
                    ),
                    meta=dict(figure="ranking", region_code=region_code, combo=combo.key, comparison=comp),
                )
            )
        reg = region_pooled(region_rates, combo)
        title = f"{combo.label}: pooled rate per 1000 live births, {region_name}"
        shapes, annotations = [], []
        if reg["rate"] is not None:
            shapes = [
                dict(type="rect", xref="x", yref="paper", x0=reg["lower"], x1=reg["upper"], y0=0, y1=1,
                     fillcolor="rgba(0,0,0,0.07)", line=dict(width=0), layer="below"),
                dict(type="line", xref="x", yref="paper", x0=reg["rate"], x1=reg["rate"], y0=0, y1=1,
                     line=dict(color="#222", width=1.5, dash="dash")),
            ]
            annotations = [
                dict(xref="x", yref="paper", x=reg["rate"], y=1.0, yanchor="bottom", showarrow=False,
                     text=f"Region {fmt(reg['rate'])}", font=dict(size=12))
            ]
        groups.append(idx)
        labels.append(combo.label)
        layouts.append(
            {"title.text": title, "yaxis.categoryarray": order, "shapes": shapes, "annotations": annotations}
        )
    legend_idx = []
    # Legend-only keys for the symbols that are not traces of their own.
    legend_idx.append(len(fig.data))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="Regional pooled rate (dashed line; grey band: its 95% CI)",
                             line=dict(color="#222", dash="dash"), hoverinfo="skip",
                             meta=dict(figure="ranking", legend_only=True)))
    legend_idx.append(len(fig.data))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="Open marker: fewer than 20 deaths (unreliable)",
                             marker=dict(symbol="circle-open", color="#555", size=8), hoverinfo="skip",
                             meta=dict(figure="ranking", legend_only=True)))
    visibilities = _visibility(groups, len(fig.data), always=legend_idx)
    _apply_default_visibility(fig, visibilities[0])
    height = max(420, 17 * n_communes + 200)
    fig.update_layout(
        **_base_layout(
            height=height,
            margin=dict(l=160, r=30, t=95, b=125),
            title=dict(text=layouts[0]["title.text"], xref="paper", x=0, xanchor="left", y=1 - 14 / height, yanchor="top", font=dict(size=15)),
            xaxis=dict(title=dict(text="Rate per 1000 live births (point and exact Poisson 95% CI)"),
                       rangemode="tozero", zeroline=False, side="bottom", showline=True, linecolor="#999",
                       mirror=False, ticks="outside"),
            yaxis=dict(type="category", categoryorder="array", categoryarray=layouts[0]["yaxis.categoryarray"],
                       automargin=True, tickfont=dict(size=11), showgrid=True, gridcolor="#f0f0f0"),
            shapes=layouts[0]["shapes"],
            annotations=layouts[0]["annotations"],
            updatemenus=_dropdown(labels, visibilities, layouts),
        )
    )
    _legend_below(fig)
    return fig


# --------------------------------------------------------------------------------------------
# 2. Trends (small multiples)
# --------------------------------------------------------------------------------------------


def fitted_line(years, rates, trend: dict | None, refit=True):
    """The fitted trend line log10(rate) = a + b year on a fine grid of years.

    Returns (grid_years, grid_rates, method) with method `refit` (intercept of a Prais-Winsten
    refit of the same years with `infant_mortality.prais_winsten`, accepted only when its slope
    equals the mart's), `anchored` (the mart's slope through the mean of log10(rate) at the
    mean year of the used years: exact for OLS, approximate for Prais-Winsten) or None.
    """
    if trend is None or _num(trend.get("slope_log10")) is None:
        return None, None, None
    b = float(trend["slope_log10"])
    start, end = int(trend["period_start"]), int(trend["period_end"])
    years = np.asarray(years, dtype=float)
    rates = np.asarray(rates, dtype=float)
    used = (years >= start) & (years <= end) & np.isfinite(rates) & (rates > 0)
    if used.sum() < 2:
        return None, None, None
    y, t = np.log10(rates[used]), years[used]
    order = np.argsort(t)
    y, t = y[order], t[order]
    a, method = float(np.mean(y) - b * np.mean(t)), "anchored"
    if refit:
        try:
            from infant_mortality.prais_winsten import prais_winsten_trend

            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                res = prais_winsten_trend(y, t)
            a_pw, b_pw = float(res.params[0]), float(res.params[1])
            if abs(b_pw - b) <= 1e-7 * max(1.0, abs(b)):
                a, method = a_pw, "refit"
        except Exception:  # noqa: BLE001 -- any failure falls back to the documented anchor
            pass
    grid = np.linspace(start, end, 4 * (end - start) + 1)
    return grid, 10 ** (a + b * grid), method


def _trend_title(name: str, trend: dict | None, bold: bool = True) -> str:
    head = f"<b>{name}</b>" if bold else name
    if trend is None:
        return head
    cls = trend.get("trend") or "not_estimable"
    colour = TREND_COLOURS.get(cls, "#555")
    apc = _num(trend.get("apc"))
    detail = TREND_LABELS.get(cls, cls).lower()
    if apc is not None:
        detail += f" · APC {fmt(apc, 1, signed=True)}%"
    return f"{head}<br><span style='color:{colour};font-size:11px'>{detail}</span>"


def trends_figure(
    series: list[tuple[str, str, pd.DataFrame, dict | None]],
    indicator: str,
    region_code: str,
    ncols: int = 4,
) -> tuple[go.Figure, dict]:
    """Small multiples of yearly rates (points, 95% CI whiskers) with the fitted trend line.

    `series` is a list of (area_code, area_name, yearly rows, trend row or None), the region
    first. Returns the figure and a count of how each fitted line was anchored.
    """
    n = len(series)
    nrows = max(1, math.ceil(n / ncols))
    row_px, gap_px = 190, 62
    plot_px = nrows * row_px + (nrows - 1) * gap_px
    height = plot_px + 150
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        subplot_titles=[_trend_title(name, tr) for _, name, _, tr in series],
        vertical_spacing=gap_px / plot_px if nrows > 1 else 0.0,
        horizontal_spacing=0.045,
    )
    methods = {"refit": 0, "anchored": 0}
    all_years = pd.concat([s[2]["year"] for s in series]) if series else pd.Series([2000])
    x_range = [float(all_years.min()) - 0.6, float(all_years.max()) + 0.6]
    for i, (code, name, rows, trend) in enumerate(series):
        r, c = i // ncols + 1, i % ncols + 1
        rows = rows.sort_values("year")
        rate = rows["rate_per_1000"].to_numpy(float)
        is_region = i == 0 and code == region_code
        point_colour = "#000" if is_region else "#444"
        fig.add_trace(
            go.Scatter(
                x=[int(y) for y in rows["year"]],
                y=_nums(rate),
                mode="markers",
                marker=dict(size=5, color=point_colour),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=_nums(rows["ci95_upper"].to_numpy(float) - rate),
                    arrayminus=_nums(rate - rows["ci95_lower"].to_numpy(float)),
                    thickness=1,
                    width=2,
                    color="#9e9e9e",
                ),
                customdata=[[_num(a), _num(b), _int(d), _int(nb)] for a, b, d, nb in
                            zip(rows["ci95_lower"], rows["ci95_upper"], rows["deaths"], rows["live_births"])],
                hovertemplate=(
                    f"<b>{name}</b> %{{x}}<br>{indicator_short(indicator)} %{{y:.2f}} per 1000"
                    "<br>95% CI %{customdata[0]:.2f} to %{customdata[1]:.2f}"
                    "<br>deaths %{customdata[2]:,} / live births %{customdata[3]:,}<extra></extra>"
                ),
                showlegend=False,
                meta=dict(figure="trends", region_code=region_code, area_code=code, indicator=indicator, kind="rates"),
            ),
            row=r,
            col=c,
        )
        grid, fitted, method = fitted_line(rows["year"], rate, trend)
        if grid is not None:
            methods[method] += 1
            cls = trend.get("trend") or "stationary"
            fig.add_trace(
                go.Scatter(
                    x=_nums(grid),
                    y=_nums(fitted),
                    mode="lines",
                    line=dict(color=TREND_COLOURS.get(cls, "#555"), width=2.2),
                    hovertemplate=(
                        f"<b>{name}</b>: Prais-Winsten fit, {TREND_LABELS.get(cls, cls).lower()}<br>"
                        f"{fmt_apc(trend)}<br>p = {fmt_p(trend.get('p_value'))}, rho = {fmt(trend.get('rho'), 2)}"
                        "<extra></extra>"
                    ),
                    showlegend=False,
                    meta=dict(figure="trends", region_code=region_code, area_code=code, indicator=indicator,
                              kind="fit", line_method=method, slope_log10=_num(trend.get("slope_log10")),
                              apc=_num(trend.get("apc")), trend=cls),
                ),
                row=r,
                col=c,
            )
    for ann in fig.layout.annotations:
        ann.font = dict(size=12)
    fig.update_xaxes(range=x_range, dtick=2, tickfont=dict(size=10), showgrid=False, showline=True, linecolor="#bbb")
    fig.update_yaxes(rangemode="tozero", tickfont=dict(size=10), gridcolor="#eee", zeroline=False)
    fig.update_layout(
        **_base_layout(
            height=height,
            margin=dict(l=50, r=20, t=70, b=40),
            showlegend=False,
        )
    )
    return fig, methods


# --------------------------------------------------------------------------------------------
# 3. Funnel plot
# --------------------------------------------------------------------------------------------


def funnel_limits(region_rate: float, births_min: float, births_max: float, levels=(0.95, 0.998), points: int = 60):
    """Rate limits (per 1000) around the regional rate over a log grid of live births."""
    grid = np.geomspace(max(1.0, births_min), births_max, points)
    expected = region_rate * grid / 1000.0
    out = {}
    for level in levels:
        lower, upper = funnel_count_limits(expected, level)
        out[level] = (1000 * lower / grid, 1000 * upper / grid)
    return grid, out


def funnel_figure(comparison: pd.DataFrame, region_rates: pd.DataFrame, region_name: str, region_code: str) -> go.Figure:
    """Pooled rate against live births with exact Poisson 95% / 99.8% limits around the region."""
    combos = combos_of(comparison)
    fig = go.Figure()
    groups, layouts, labels = [], [], []
    for combo in combos:
        df = combo.select(comparison)
        idx = []
        reg = region_pooled(region_rates, combo)
        region_rate = reg["rate"] if reg["rate"] is not None else float(df["region_rate_per_1000"].median())
        births = df["live_births"].to_numpy(float)
        lo, hi = float(np.nanmin(births)) * 0.7, float(np.nanmax(births)) * 1.4
        grid, limits = funnel_limits(region_rate, lo, hi)
        for level, dash, name in ((0.95, "dash", "95% control limits"), (0.998, "dot", "99.8% control limits")):
            lower, upper = limits[level]
            idx.append(len(fig.data))
            fig.add_trace(
                go.Scatter(
                    x=_nums(grid) + [None] + _nums(grid),
                    y=_nums(upper) + [None] + _nums(lower),
                    mode="lines",
                    line=dict(color="#555", dash=dash, width=1.3),
                    name=name,
                    legendgroup=name,
                    hoverinfo="skip",
                    meta=dict(figure="funnel", region_code=region_code, combo=combo.key, level=level),
                )
            )
        idx.append(len(fig.data))
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[region_rate, region_rate],
                mode="lines",
                line=dict(color="#222", width=1.5),
                name="Regional rate",
                hovertemplate=f"Regional pooled rate {fmt(region_rate)} per 1000<extra></extra>",
                meta=dict(figure="funnel", region_code=region_code, combo=combo.key, region_rate=region_rate),
            )
        )
        for cat in FUNNEL_COLOURS:
            sub = df[df["funnel_category"] == cat]
            if sub.empty:
                continue
            idx.append(len(fig.data))
            hover = [
                f"<b>{r.commune_name}</b><br>{combo.label}: {fmt(r.rate_per_1000)} per 1000 "
                f"(95% CI {fmt(r.ci95_lower)} to {fmt(r.ci95_upper)})<br>deaths {fmt(r.deaths, 0, thousands=True)} / "
                f"live births {fmt(r.live_births, 0, thousands=True)}<br>RT {fmt(r.rate_ratio)} · "
                f"{FUNNEL_LABELS[cat].lower()}"
                for r in sub.itertuples()
            ]
            fig.add_trace(
                go.Scatter(
                    x=_nums(sub["live_births"]),
                    y=_nums(sub["rate_per_1000"]),
                    mode="markers" if cat == "within" else "markers+text",
                    name=FUNNEL_LABELS[cat],
                    legendgroup=cat,
                    marker=dict(color=FUNNEL_COLOURS[cat], size=9, line=dict(width=0.8, color="#333")),
                    text=sub["commune_name"].tolist(),
                    textposition="middle right" if cat.startswith("above") else "middle left",
                    textfont=dict(size=10, color=FUNNEL_COLOURS[cat]),
                    hovertext=hover,
                    hovertemplate="%{hovertext}<extra></extra>",
                    meta=dict(figure="funnel", region_code=region_code, combo=combo.key, funnel_category=cat),
                )
            )
        groups.append(idx)
        labels.append(combo.label)
        layouts.append({"title.text": f"{combo.label}: funnel plot against the regional rate, {region_name}"})
    visibilities = _visibility(groups, len(fig.data))
    _apply_default_visibility(fig, visibilities[0])
    fig.update_layout(
        **_base_layout(
            height=600,
            margin=dict(l=70, r=30, t=95, b=125),
            title=dict(text=layouts[0]["title.text"], xref="paper", x=0, xanchor="left", y=1 - 14 / 600, yanchor="top", font=dict(size=15)),
            xaxis=dict(type="log", title=dict(text="Live births in the period (log scale)"), showline=True,
                       linecolor="#999", ticks="outside"),
            yaxis=dict(title=dict(text="Pooled rate per 1000 live births"), rangemode="tozero", zeroline=False),
            updatemenus=_dropdown(labels, visibilities, layouts),
        )
    )
    _legend_below(fig)
    return fig


# --------------------------------------------------------------------------------------------
# 4. Map
# --------------------------------------------------------------------------------------------

RT_TICKS = (0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0)
# Seats farther than this from the region's median longitude or latitude (islands such as Rapa
# Nui, placeholder coordinates) would squash the map: they are listed in a note instead.
MAP_OUTLIER_DEGREES = 5.0
# The width (px) the map is assumed to be drawn at when placing labels (the report's main column).
MAP_ASSUMED_WIDTH = 1250


def map_layout_boxes(lon, lat):
    """Where the map's panels look: (kept mask, overview box, zoom box or None).

    The zoom box encloses the dense core of the region (the inter-quartile box of the seats,
    widened by 0.6 times its size on each side); it is used only when it holds at least 8 seats
    and covers less than a third of the overview.
    """
    lon, lat = np.asarray(lon, float), np.asarray(lat, float)
    ok = np.isfinite(lon) & np.isfinite(lat)
    if ok.any():
        ok &= (np.abs(lon - np.nanmedian(lon[ok])) <= MAP_OUTLIER_DEGREES) & (
            np.abs(lat - np.nanmedian(lat[ok])) <= MAP_OUTLIER_DEGREES
        )
    if not ok.any():
        return ok, None, None
    x, y = lon[ok], lat[ok]
    pad_x, pad_y = 0.06 * np.ptp(x) + 0.03, 0.06 * np.ptp(y) + 0.03
    overview = (x.min() - pad_x, x.max() + pad_x, y.min() - pad_y, y.max() + pad_y)
    (x1, x3), (y1, y3) = np.quantile(x, [0.25, 0.75]), np.quantile(y, [0.25, 0.75])
    wx, wy = max(x3 - x1, 0.02), max(y3 - y1, 0.02)
    zoom = (x1 - 0.6 * wx, x3 + 0.6 * wx, y1 - 0.6 * wy, y3 + 0.6 * wy)
    inside = (x >= zoom[0]) & (x <= zoom[1]) & (y >= zoom[2]) & (y <= zoom[3])
    area = lambda b: (b[1] - b[0]) * (b[3] - b[2])  # noqa: E731
    if inside.sum() < 8 or area(zoom) > area(overview) / 3:
        zoom = None
    return ok, overview, zoom


TEXT_POSITIONS = ("top center", "bottom center", "middle right", "middle left",
                  "top right", "top left", "bottom right", "bottom left")


def place_labels(x_px, y_px, names, diam_px, bounds_px, font_px: float = 10.0) -> list[str]:
    """Greedy choice of each label's `textposition` to limit overlaps (pixel estimates).

    Points are placed largest first; each takes the position whose label box overlaps least
    with the labels already placed, the other markers and the panel's edges.
    """
    n = len(x_px)
    h = font_px * 1.25
    widths = [0.6 * font_px * len(str(t)) + 2 for t in names]
    radii = [d / 2 for d in diam_px]
    placed: list[tuple[float, float, float, float]] = []
    marker_boxes = [(x - r, x + r, y - r, y + r) for x, y, r in zip(x_px, y_px, radii)]
    bx0, bx1, by0, by1 = bounds_px

    def overlap(a, b):
        return max(0.0, min(a[1], b[1]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[2], b[2]))

    out = ["top center"] * n
    for i in sorted(range(n), key=lambda k: -radii[k]):
        x, y, r, w = x_px[i], y_px[i], radii[i], widths[i]
        g = r + 2
        boxes = {
            "top center": (x - w / 2, x + w / 2, y + g, y + g + h),
            "bottom center": (x - w / 2, x + w / 2, y - g - h, y - g),
            "middle right": (x + g, x + g + w, y - h / 2, y + h / 2),
            "middle left": (x - g - w, x - g, y - h / 2, y + h / 2),
            "top right": (x + 0.7 * r, x + 0.7 * r + w, y + 0.7 * r, y + 0.7 * r + h),
            "top left": (x - 0.7 * r - w, x - 0.7 * r, y + 0.7 * r, y + 0.7 * r + h),
            "bottom right": (x + 0.7 * r, x + 0.7 * r + w, y - 0.7 * r - h, y - 0.7 * r),
            "bottom left": (x - 0.7 * r - w, x - 0.7 * r, y - 0.7 * r - h, y - 0.7 * r),
        }
        best, best_cost = "top center", float("inf")
        for rank, pos in enumerate(TEXT_POSITIONS):
            b = boxes[pos]
            cost = sum(overlap(b, p) for p in placed) * 3
            cost += sum(overlap(b, m) for j, m in enumerate(marker_boxes) if j != i)
            outside = (b[1] - b[0]) * (b[3] - b[2]) - overlap(b, (bx0, bx1, by0, by1))
            cost += 4 * outside + 0.5 * rank
            if cost < best_cost:
                best, best_cost = pos, cost
        out[i] = best
        placed.append(boxes[best])
    return out


def map_figure(
    comparison: pd.DataFrame,
    communes: pd.DataFrame,
    trends: pd.DataFrame | None,
    region_name: str,
    region_code: str,
    trend_windows: dict | None = None,
) -> go.Figure:
    """Commune seats on plain longitude/latitude axes (equal distances), no tiles.

    Two panels when the region has a dense core: the whole region (left, the core framed) and
    the core enlarged (right). Options of the dropdown: coloured by RT (log scale, diverging,
    centred at 1) per indicator and period, or by trend class per indicator; marker area
    proportional to live births; significant differences from the rest of the region outlined
    in black.
    """
    combos = combos_of(comparison)
    geo = communes[["commune_code", "latitude", "longitude"]]
    comp = comparison.merge(geo, on="commune_code", how="left")
    seats = comp.drop_duplicates("commune_code")
    kept, overview, zoom = map_layout_boxes(seats["longitude"], seats["latitude"])
    kept_codes = set(seats.loc[kept, "commune_code"])
    not_shown = sorted(seats.loc[~kept, "commune_name"].tolist())
    comp = comp[comp["commune_code"].isin(kept_codes)]
    trend_by = {}
    if trends is not None and len(trends):
        for rec in trends.to_dict("records"):
            trend_by[(rec["indicator"], rec["area_code"])] = rec
    births_max = float(comp["live_births"].max()) if len(comp) else 1.0
    max_px = 30.0 if zoom is not None else 36.0
    size_ref = 2.0 * births_max / (max_px**2)
    mean_lat = float(comp["latitude"].mean()) if len(comp) else 0.0
    panels = [("x", "y")] + ([("x2", "y2")] if zoom is not None else [])

    def in_zoom(df):
        if zoom is None:
            return np.zeros(len(df), bool)
        return (
            df["longitude"].between(zoom[0], zoom[1]) & df["latitude"].between(zoom[2], zoom[3])
        ).to_numpy()

    fig = go.Figure()
    groups, labels, layouts = [], [], []

    def hover_rows(df, indicator):
        out = []
        for r in df.itertuples():
            tr = trend_by.get((indicator, r.commune_code))
            trend_txt = "trend: not available" if tr is None else (
                f"trend {tr.get('period_start')}-{tr.get('period_end')}: "
                f"{TREND_LABELS.get(tr.get('trend'), tr.get('trend'))}, {fmt_apc(tr)}"
            )
            out.append(
                f"<b>{r.commune_name}</b> · {indicator_short(indicator)} {r.period_label}<br>"
                f"rate {fmt(r.rate_per_1000)} per 1000 (95% CI {fmt(r.ci95_lower)} to {fmt(r.ci95_upper)})"
                f"<br>live births {fmt(r.live_births, 0, thousands=True)}, deaths {fmt(r.deaths, 0, thousands=True)}"
                f"<br>RT {fmt(r.rate_ratio)} (95% CI {fmt(r.rate_ratio_ci95_lower)} to {fmt(r.rate_ratio_ci95_upper)})"
                f"<br>RAP {fmt(r.excess_rate_per_1000, 2, signed=True)} per 1000 · RAP% "
                f"{fmt(r.attributable_percent, 1, signed=True)}%<br>vs rest of region: {r.comparison} "
                f"(mid-p {fmt_p(r.p_value)})<br>{trend_txt}"
            )
        return out

    ratio = 1.0 / max(0.2, math.cos(math.radians(mean_lat)))
    # Pixel geometry of the panels at the report's usual width, for the label placement.
    plot_w, plot_h = MAP_ASSUMED_WIDTH - 150, 780 - 200
    domains = [(0.0, 0.47), (0.53, 0.95)] if zoom is not None else [(0.0, 0.93)]
    boxes = [overview] + ([zoom] if zoom is not None else [])

    def fill(box, k):
        """Widen the box's shorter side so that, at equal distances, it fills its panel."""
        if box is None:
            return None
        x0, x1, y0, y1 = box
        w_px, h_px = (domains[k][1] - domains[k][0]) * plot_w, plot_h
        need_w = (y1 - y0) * ratio * w_px / h_px  # lon degrees that fill the width at this height
        if need_w > x1 - x0:
            c = (x0 + x1) / 2
            return (c - need_w / 2, c + need_w / 2, y0, y1)
        need_h = (x1 - x0) * h_px / w_px / ratio
        c = (y0 + y1) / 2
        return (x0, x1, c - need_h / 2, c + need_h / 2)

    boxes = [fill(b, k) for k, b in enumerate(boxes)]
    overview = boxes[0]
    if zoom is not None:
        zoom = boxes[1]

    def positions(k, df, text):
        if boxes[k] is None:
            return "top center"
        x0, x1, y0, y1 = boxes[k]
        w_dom = (domains[k][1] - domains[k][0]) * plot_w
        scale = min(w_dom / (x1 - x0), plot_h / ((y1 - y0) * ratio))
        xs = ((df["longitude"].to_numpy(float) - x0) * scale).tolist()
        ys = ((df["latitude"].to_numpy(float) - y0) * scale * ratio).tolist()
        diam = np.maximum(4.0, np.sqrt(df["live_births"].to_numpy(float).clip(min=0) / size_ref)).tolist()
        all_text = [t if t else "" for t in text]
        return place_labels(xs, ys, all_text, diam, (0, (x1 - x0) * scale, 0, (y1 - y0) * scale * ratio),
                            font_px=10 if k > 0 else 9)

    def add(df, meta, marker, name=None, showlegend=False):
        """The same points in every panel; the overview labels only the seats outside the zoom."""
        idx = []
        inside = in_zoom(df)
        for k, (xa, ya) in enumerate(panels):
            text = df["commune_name"].tolist()
            if zoom is not None:  # each seat is labelled in one panel only
                text = [t if (z if k > 0 else not z) else "" for t, z in zip(text, inside)]
            textpos = positions(k, df, text)
            m = dict(marker)
            if k > 0 and "colorbar" in m:
                m = {key: v for key, v in m.items() if key != "colorbar"}
                m["showscale"] = False
            idx.append(len(fig.data))
            fig.add_trace(
                go.Scatter(
                    x=_nums(df["longitude"]),
                    y=_nums(df["latitude"]),
                    xaxis=xa,
                    yaxis=ya,
                    mode="markers+text",
                    text=text,
                    textposition=textpos,
                    textfont=dict(size=10 if k > 0 else 9, color="#333"),
                    cliponaxis=True,
                    hovertext=hover_rows(df, meta.get("indicator") or meta["combo"].split("|")[0]),
                    hovertemplate="%{hovertext}<extra></extra>",
                    customdata=[[r.commune_name, _num(r.rate_per_1000), _num(r.ci95_lower), _num(r.ci95_upper),
                                 _num(r.rate_ratio), _num(r.excess_rate_per_1000), _num(r.attributable_percent)]
                                for r in df.itertuples()],
                    marker=m,
                    name=name or "",
                    legendgroup=name,
                    showlegend=showlegend and k == 0,
                    meta=dict(meta, panel="overview" if k == 0 else "zoom"),
                )
            )
        return idx

    for combo in combos:
        df = combo.select(comp)
        if df.empty:
            continue
        log_rt = np.log2(df["rate_ratio"].to_numpy(float).clip(min=1e-3))
        span = max(math.log2(1.5), float(np.nanmax(np.abs(log_rt))) if len(log_rt) else 1.0)
        ticks = [t for t in RT_TICKS if abs(math.log2(t)) <= span + 1e-9]
        sig = df["comparison"].isin(["higher", "lower"]).to_numpy()
        marker = dict(
            size=_nums(df["live_births"]), sizemode="area", sizeref=size_ref, sizemin=4,
            color=_nums(log_rt), colorscale="RdBu_r", cmin=-span, cmax=span, cmid=0, opacity=0.92,
            line=dict(width=[2.4 if s else 0.6 for s in sig], color=["#000" if s else "#777" for s in sig]),
            colorbar=dict(title=dict(text="RT", font=dict(size=13)), tickvals=[math.log2(t) for t in ticks],
                          ticktext=[f"{t:g}" for t in ticks], len=0.7, thickness=16, x=1.0, xanchor="left"),
        )
        groups.append(add(df, dict(figure="map", region_code=region_code, combo=combo.key, colour="rate_ratio"),
                          marker, name="RT"))
        labels.append(f"RT: {combo.label}")
        layouts.append({"title.text": f"RT (commune rate / region rate), {combo.label}, {region_name}<br>"
                                      "<span style='font-size:12px'>blue below 1, red above 1; bold black outline: "
                                      "significantly different from the rest of the region; marker area: live births"
                                      "</span>"})
    if trend_by:
        for ind in indicator_order(comparison["indicator"].unique()):
            window = (trend_windows or {}).get(ind)
            ind_combos = [c for c in combos if c.indicator == ind]
            if not ind_combos:
                continue
            base = ind_combos[0]
            if window is not None:
                base = next((c for c in ind_combos if (c.period_start, c.period_end) == tuple(window)), base)
            df = base.select(comp)
            classes = [(trend_by.get((ind, code)) or {}).get("trend") or "not_estimable" for code in df["commune_code"]]
            df = df.assign(_trend=classes)
            idx = []
            for cls in TREND_COLOURS:
                sub = df[df["_trend"] == cls]
                if sub.empty:
                    continue
                marker = dict(size=_nums(sub["live_births"]), sizemode="area", sizeref=size_ref, sizemin=4,
                              color=TREND_COLOURS[cls], opacity=0.9, line=dict(width=0.8, color="#333"))
                idx += add(sub, dict(figure="map", region_code=region_code, indicator=ind, colour="trend", trend=cls),
                           marker, name=f"{TREND_LABELS[cls]} trend", showlegend=True)
            if idx:
                win = f" {window[0]}-{window[1]}" if window else ""
                groups.append(idx)
                labels.append(f"Trend: {indicator_short(ind)}{win}")
                layouts.append({"title.text": f"Trend class{win} (Prais-Winsten on log10 rate), {indicator_short(ind)}, "
                                              f"{region_name}<br><span style='font-size:12px'>marker area: live births "
                                              f"{base.period_label}</span>"})
    visibilities = _visibility(groups, len(fig.data))
    if visibilities:
        _apply_default_visibility(fig, visibilities[0])
    axis = dict(showgrid=True, gridcolor="#e6e6e6", zeroline=False, constrain="domain", ticks="outside",
                showline=True, linecolor="#999", mirror=True)
    layout = dict(
        xaxis=dict(axis, title=dict(text="Longitude (°)"), domain=[0, 0.47] if zoom is not None else [0, 0.93],
                   range=list(overview[:2]) if overview else None),
        yaxis=dict(axis, title=dict(text="Latitude (°)"), scaleanchor="x", scaleratio=ratio,
                   range=list(overview[2:]) if overview else None),
    )
    annotations, shapes = [], []
    if zoom is not None:
        layout["xaxis2"] = dict(axis, title=dict(text="Longitude (°)"), domain=[0.53, 0.95], range=list(zoom[:2]),
                                anchor="y2")
        layout["yaxis2"] = dict(axis, scaleanchor="x2", scaleratio=ratio, range=list(zoom[2:]), anchor="x2")
        shapes.append(dict(type="rect", xref="x", yref="y", x0=zoom[0], x1=zoom[1], y0=zoom[2], y1=zoom[3],
                           line=dict(color="#555", width=1, dash="dot")))
        annotations.append(dict(xref="x", yref="y", x=zoom[1], y=zoom[3], xanchor="right", yanchor="bottom",
                                text="enlarged at right", showarrow=False, font=dict(size=10, color="#555")))
        annotations.append(dict(xref="x2 domain", yref="y2 domain", x=0, y=1, xanchor="left", yanchor="bottom",
                                text="Dense core, enlarged", showarrow=False, font=dict(size=12)))
        annotations.append(dict(xref="x domain", yref="y domain", x=0, y=1, xanchor="left", yanchor="bottom",
                                text="Whole region", showarrow=False, font=dict(size=12)))
    fig.update_layout(
        **_base_layout(
            height=780,
            margin=dict(l=70, r=80, t=110, b=90),
            title=dict(text=layouts[0]["title.text"] if layouts else region_name, xref="paper", x=0, xanchor="left",
                       y=1 - 16 / 780, yanchor="top", font=dict(size=15)),
            updatemenus=_dropdown(labels, visibilities, layouts),
            plot_bgcolor="#fafafa",
            shapes=shapes,
            annotations=annotations,
            **layout,
        )
    )
    for menu in fig.layout.updatemenus:
        menu.y, menu.yanchor, menu.pad = 1.06, "bottom", dict(b=0)
    _legend_below(fig)
    fig.layout.meta = dict(not_on_map=not_shown)
    return fig
