"""What every figure of the report shares: indicator names, colours, number formats, the
indicator x period combinations and the dropdown that switches between them.

Every figure builder takes plain pandas DataFrames read from the marts and returns a
``plotly.graph_objects.Figure``. Numbers are passed to plotly as Python lists (never numpy
arrays, which plotly would encode as base64 typed arrays), so the figure JSON embedded in the
report is readable and the tests can check the values against the marts. Each trace carries a
``meta`` dict (region, indicator, period, ...) naming what it shows.

A figure that shows several indicators / periods holds the traces of all of them and a
dropdown toggling their visibility; the first option is the default (the full window of the
first indicator present).

Narrow screens: a figure's ``layout.meta.narrow`` (and a trace's ``meta.narrow``) holds the
changes ``static/report.js`` applies when the figure is drawn less than 600 px wide (smaller
fonts, labels hidden, panels stacked); the wide figure is what Python builds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

# Narrow layouts apply below this width (px); static/report.js uses the same number.
NARROW_PX = 600
# The width (px) a figure is assumed to be drawn at when placing labels (the report's main column).
ASSUMED_WIDTH = 1250


@dataclass(frozen=True)
class Indicator:
    code: str
    abbreviation_es: str
    name_en: str
    abbreviation_en: str
    ages: str


# The names the report uses when the warehouse has no marts.dim_indicator (built before it
# existed); `use_indicators` replaces them with the mart's rows.
_INDICATORS: dict[str, Indicator] = {
    "imr": Indicator("imr", "TMI", "infant mortality", "IMR", "under 1 year"),
    "nmr": Indicator("nmr", "TMN", "neonatal mortality", "NMR", "0-27 days"),
    "enmr": Indicator("enmr", "TMNP", "early neonatal mortality", "ENMR", "0-6 days"),
    "pnmr": Indicator("pnmr", "TMIT", "post-neonatal (late infant) mortality", "PNMR", "28 days to under 1 year"),
}


def use_indicators(indicators: list[Indicator]) -> None:
    """Name the indicators as `marts.dim_indicator` does (its order is the report's order)."""
    _INDICATORS.clear()
    _INDICATORS.update({i.code: i for i in indicators})


def indicators() -> dict[str, Indicator]:
    return dict(_INDICATORS)


def _indicator(code: str) -> Indicator:
    return _INDICATORS.get(code) or Indicator(code, code.upper(), code, code.upper(), "")


COMPARISON_COLOURS = {"higher": "#c62828", "lower": "#1565c0", "similar": "#8c8c8c", "untested": "#d0d0d0"}
COMPARISON_LABELS = {
    "higher": "Significantly higher than the rest of the region",
    "lower": "Significantly lower than the rest of the region",
    "similar": "No significant difference",
    "untested": "Not tested (no comparison in the mart)",
}
FUNNEL_COLOURS = {
    "above_99_8": "#b2182b",
    "above_95": "#ef8a62",
    "within": "#9e9e9e",
    "below_95": "#67a9cf",
    "below_99_8": "#2166ac",
    "uncategorised": "#e0e0e0",
}
FUNNEL_LABELS = {
    "above_99_8": "Above the 99.8% limit",
    "above_95": "Above the 95% limit",
    "within": "Within the limits",
    "below_95": "Below the 95% limit",
    "below_99_8": "Below the 99.8% limit",
    "uncategorised": "No funnel category in the mart",
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
    "insufficient_data": "Insufficient data",
}
FONT = dict(family="DejaVu Sans, Arial, Helvetica, sans-serif", size=13, color="#222")


def indicator_short(indicator: str) -> str:
    """`TMI (IMR)`: the Spanish abbreviation with the English one."""
    i = _indicator(indicator)
    return f"{i.abbreviation_es} ({i.abbreviation_en})"


def indicator_long(indicator: str) -> str:
    """`TMI, infant mortality rate (IMR)`."""
    i = _indicator(indicator)
    return f"{i.abbreviation_es}, {i.name_en} rate ({i.abbreviation_en})"


def indicator_order(codes) -> list[str]:
    known = [i for i in _INDICATORS if i in set(codes)]
    return known + sorted(set(codes) - set(known))


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def num(x):
    """A JSON-friendly float (None for missing / non-finite)."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def nums(values) -> list:
    return [num(v) for v in values]


def to_int(x):
    v = num(x)
    return None if v is None else int(round(v))


def fmt(x, digits: int = 2, signed: bool = False, thousands: bool = False) -> str:
    """Plain-text number; an en dash for missing values."""
    v = num(x)
    if v is None:
        return "–"
    spec = ("+" if signed else "") + ("," if thousands else "") + f".{digits}f"
    return format(v, spec).replace("-", "−")


def fmt_p(p) -> str:
    v = num(p)
    if v is None:
        return "–"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def fmt_apc(row) -> str:
    """`APC −2.9% (−4.1; −1.7)` or the trend's reason when it has no APC."""
    if row is None:
        return "trend not available"
    apc = num(row.get("apc"))
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


def with_rate(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that have a pooled rate (a commune without live births in the period has none;
    the page lists those in a note)."""
    return df[df["rate_per_1000"].notna() & df["live_births"].notna()]


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


def dropdown(labels: list[str], visibilities: list[list[bool]], layouts: list[dict]) -> list[dict]:
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


def base_layout(**kw) -> dict:
    layout = dict(
        template="plotly_white",
        font=FONT,
        hoverlabel=dict(font=dict(family=FONT["family"], size=12)),
        legend=dict(orientation="h", x=0, xanchor="left", y=-0.04, yanchor="top"),
    )
    layout.update(kw)
    return layout


def legend_below(fig: go.Figure, px: int = 62) -> None:
    """Horizontal legend `px` pixels below the plot area (below the x-axis title)."""
    m = fig.layout.margin
    plot_h = (fig.layout.height or 450) - (m.t or 0) - (m.b or 0)
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-px / max(plot_h, 1), yanchor="top"))


def visibility(groups: list[list[int]], n_traces: int, always: list[int] = ()) -> list[list[bool]]:
    out = []
    for idx in groups:
        vis = [False] * n_traces
        for i in list(idx) + list(always):
            vis[i] = True
        out.append(vis)
    return out


def apply_default_visibility(fig: go.Figure, visible: list[bool]) -> None:
    for trace, vis in zip(fig.data, visible):
        trace.visible = vis


def narrow_layout(fig: go.Figure | None, extra: dict | None = None) -> dict:
    """Layout changes (plotly attribute paths) for a figure drawn under NARROW_PX: smaller type,
    the dropdown moved to the left under the title, thin side margins."""
    out = {"font.size": 11, "title.font.size": 12, "legend.font.size": 10, "margin.r": 10}
    for k, menu in enumerate(fig.layout.updatemenus if fig is not None else ()):
        out.update({f"updatemenus[{k}].x": 0, f"updatemenus[{k}].xanchor": "left",
                    f"updatemenus[{k}].font.size": 11})
    out.update(extra or {})
    return out


# --------------------------------------------------------------------------------------------
# Labels next to markers
# --------------------------------------------------------------------------------------------

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
