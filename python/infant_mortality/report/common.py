"""What every figure of the report shares: indicator names, colours, number formats, the
indicator x period combinations and the dropdown that switches between them.

Every figure builder takes plain pandas DataFrames read from the marts and returns a
``plotly.graph_objects.Figure``. Numbers are passed to plotly as Python lists (never numpy
arrays, which plotly would encode as base64 typed arrays), so the figure JSON embedded in the
report is readable and the tests can check the values against the marts. Each trace carries a
``meta`` dict (region, indicator, period, ...) naming what it shows.

A figure that shows several indicators / periods holds the traces of all of them and a menu
(`menu`: an HTML select the page puts above the figure, reachable by keyboard) toggling their
visibility; the first option is the default (the full window of the first indicator present).
Texts come from the catalogue (`i18n.t`) in the page's language.

Narrow screens: a figure's ``layout.meta.narrow`` (and a trace's ``meta.narrow``) holds the
changes ``static/report.js`` applies when the figure is drawn less than 600 px wide (smaller
fonts, labels hidden, panels stacked); the wide figure is what Python builds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from infant_mortality.report.i18n import MESSAGES, language, localise_number, percent, pick, separators, t

# Narrow layouts apply below this width (px); static/report.js uses the same number.
NARROW_PX = 600
# The width (px) a figure is assumed to be drawn at when placing labels (the report's main column).
ASSUMED_WIDTH = 1250


@dataclass(frozen=True)
class Indicator:
    code: str
    abbreviation_es: str
    name_es: str
    ages_es: str
    abbreviation_en: str
    name_en: str
    ages_en: str

    @property
    def abbreviation(self) -> str:
        return pick(self.abbreviation_es, self.abbreviation_en)

    @property
    def name(self) -> str:
        return pick(self.name_es, self.name_en)

    @property
    def ages(self) -> str:
        return pick(self.ages_es, self.ages_en)


# The names the report uses when the warehouse has no marts.dim_indicator (built before it
# existed); `use_indicators` replaces them with the mart's rows.
_INDICATORS: dict[str, Indicator] = {
    "imr": Indicator("imr", "TMI", "mortalidad infantil", "menores de 1 año", "IMR", "infant mortality", "under 1 year"),
}


def use_indicators(indicators: list[Indicator]) -> None:
    """Name the indicators as `marts.dim_indicator` does (its order is the report's order)."""
    _INDICATORS.clear()
    _INDICATORS.update({i.code: i for i in indicators})


def indicators() -> dict[str, Indicator]:
    return dict(_INDICATORS)


def _indicator(code: str) -> Indicator:
    return _INDICATORS.get(code) or Indicator(code, code.upper(), code, "", code.upper(), code, "")


# Colour-blind-safe classes (Okabe-Ito for the comparison and the trends, ColorBrewer RdBu for
# the funnel), each also told apart by its marker or line: triangles point up for higher,
# down for lower; a dashed line is decreasing, a dotted one stationary.
COMPARISON_COLOURS = {"higher": "#D55E00", "lower": "#0072B2", "similar": "#8c8c8c", "untested": "#c8c8c8"}
COMPARISON_SYMBOLS = {"higher": "triangle-up", "lower": "triangle-down", "similar": "circle", "untested": "x"}
FUNNEL_COLOURS = {
    "above_99_8": "#b2182b",
    "above_95": "#d6604d",
    "within": "#8c8c8c",
    "below_95": "#4393c3",
    "below_99_8": "#2166ac",
    "uncategorised": "#d0d0d0",
}
FUNNEL_SYMBOLS = {"above_99_8": "triangle-up", "above_95": "triangle-up-open", "within": "circle",
                  "below_95": "triangle-down-open", "below_99_8": "triangle-down", "uncategorised": "x"}
TREND_COLOURS = {
    "increasing": "#D55E00",
    "decreasing": "#0072B2",
    "stationary": "#666666",
    "not_confirmed": "#a6a6a6",
    "not_estimable": "#bdbdbd",
    "insufficient_data": "#d9d9d9",
}
TREND_DASHES = {"increasing": "solid", "decreasing": "dash", "stationary": "dot"}
# Map fill patterns of the trend classes (plotly `fillpattern.shape`): hatching, not colour alone.
TREND_PATTERNS = {"increasing": "/", "decreasing": "\\", "stationary": "", "not_confirmed": "-", "not_estimable": ".",
                  "insufficient_data": "x"}
FONT = dict(family="DejaVu Sans, Arial, Helvetica, sans-serif", size=13, color="#222")


def comparison_label(cls: str) -> str:
    return t(f"comparison.{cls}")


def funnel_label(cls: str) -> str:
    return t(f"funnel.{cls}")


def trend_label(cls: str | None) -> str:
    """The trend class as the page names it (an unknown class as it is)."""
    key = f"trend.{cls or 'not_estimable'}"
    return t(key) if key in MESSAGES else str(cls)


def indicator_short(indicator: str) -> str:
    """`TMI` (Spanish) or `IMR` (English)."""
    return _indicator(indicator).abbreviation


def indicator_long(indicator: str) -> str:
    """`TMI, tasa de mortalidad infantil` / `IMR, infant mortality rate`."""
    i = _indicator(indicator)
    return t("indicator.long", abbr=i.abbreviation, name=i.name)


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
    """A number as the page writes it in its language (`7,44` / `7.44`); an en dash for missing
    values; a value that rounds to zero has no sign (never `-0.0`)."""
    v = num(x)
    if v is None:
        return t("missing")
    if round(v, digits) == 0:
        v, signed = 0.0, False
    spec = ("+" if signed else "") + ("," if thousands else "") + f".{digits}f"
    return localise_number(format(v, spec)).replace("-", "−")


def fmt_p(p) -> str:
    v = num(p)
    if v is None:
        return t("missing")
    return "<" + fmt(0.001, 3) if v < 0.001 else fmt(v, 3)


def fmt_ci(lo, hi, digits: int = 2) -> str:
    """`IC 95 % 6,90 a 8,00` / `95% CI 6.90 to 8.00`."""
    return t("ci", level=t("ci.level"), lo=fmt(lo, digits), hi=fmt(hi, digits))


# The confidence level of the trends' APC intervals: the build's (meta_build.trend_ci_level).
_TREND_CI_LEVEL = [0.95]


def use_trend_ci_level(level: float) -> None:
    _TREND_CI_LEVEL[0] = float(level)


def fmt_apc(row) -> str:
    """`PCA (APC) −2,9 % (IC 95 % −4,1; −1,7)` or the trend's reason when it has no APC."""
    if row is None:
        return t("trend.none")
    apc = num(row.get("apc"))
    if apc is None:
        return t("apc.none")
    return t("apc", apc=fmt(apc, 1, signed=True), level=percent(_TREND_CI_LEVEL[0]),
             lo=fmt(row.get("apc_ci95_lower"), 1, signed=True), hi=fmt(row.get("apc_ci95_upper"), 1, signed=True))


def trend_has_class(row) -> bool:
    """Whether a trend row carries a class (a valid fit): only then are its class and APC shown."""
    return row is not None and row.get("trend") in ("increasing", "decreasing", "stationary")


def method_label(method: str, mart_label: str) -> str:
    """A trend method's name: the mart's (fct_trends.method_label, meta_build), in Spanish the catalogue's."""
    key = f"method.{method}"
    return t(key) if language() == "es" and key in MESSAGES else mart_label


def fmt_apc_short(apc) -> str:
    return t("apc.short", apc=fmt(apc, 1, signed=True))


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


def menu(labels: list[str], restyles: list[dict], relayouts: list[dict]) -> list[dict]:
    """The options of a figure's menu (an HTML select above it, see `page.FigureStore`): each a
    label and plotly update arguments [trace changes, layout changes], applied by report.js
    when the option is chosen; none for a single option."""
    if len(labels) <= 1:
        return []
    return [dict(label=lab, args=[vis, lay]) for lab, vis, lay in zip(labels, restyles, relayouts)]


def base_layout(**kw) -> dict:
    layout = dict(
        template="plotly_white",
        font=FONT,
        separators=separators(),
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


def narrow_layout(extra: dict | None = None) -> dict:
    """Layout changes (plotly attribute paths) for a figure drawn under NARROW_PX: smaller type,
    thin side margins."""
    out = {"font.size": 11, "title.font.size": 12, "legend.font.size": 10, "margin.r": 10}
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
