"""How the report's figures look: the class colours and markers, the type, the widths the
layout assumes, the base layout of every figure, its narrow-screen changes, and the placement of
labels beside markers.

Narrow screens: a figure's ``layout.meta.narrow`` (and a trace's ``meta.narrow``) holds the
changes ``static/report.js`` applies when the figure is drawn less than 600 px wide (smaller
fonts, labels hidden, panels stacked); the wide figure is what Python builds.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from infant_mortality.report.i18n import separators

# Narrow layouts apply below this width (px); static/report.js uses the same number.
NARROW_PX = 600
# The width (px) a figure is assumed to be drawn at when placing labels (the report's main column).
ASSUMED_WIDTH = 1250

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
# The fill of a commune without a value on the map, always hatched too: its grey is within ΔE 3
# of the probability's middle class and of the diverging scale's middle (both #f7f7f7), so colour
# alone would show "no value" as "no evidence either way" or as RT 1.
NO_DATA = "#f0f0f0"
NO_DATA_PATTERN = "+"
# The map's BYM2 options (fct_bym2_rates) and its clusters (fct_spatial_clusters).
# A commune with no neighbour (its BYM2 effect is the unstructured part only) is cross-hatched and
# marked by a diamond at its label point (the hatching is lost on a small island such as Puqueldón).
ISLAND_PATTERN = "x"
ISLAND_SYMBOL = "diamond-open"
# The ink of a fill pattern: dark, white on the darkest fills (where dark hatching vanishes).
PATTERN_INK, PATTERN_INK_ON_DARK = "#222", "#fff"
# The probability of exceeding the region's rate in five classes, < 0.05 to > 0.95: their upper
# bounds (the last class is open) and ColorBrewer's 5-class RdBu, safe for colour-blind readers;
# the top class is also outlined (above the build's cut-off, 0.95 by default).
EXCEEDANCE_BOUNDS = (0.05, 0.2, 0.8, 0.95)
EXCEEDANCE_COLOURS = ("#2166ac", "#92c5de", "#f7f7f7", "#f4a582", "#b2182b")
# Cluster types of local Moran's I (fct_spatial_clusters.cluster_type), in the legend's order: hot
# and cold spots dark, outliers light, red high and blue low (ColorBrewer RdBu), each with its
# own hatching too (tests/report/test_map_palettes.py measures them apart under colour blindness).
CLUSTER_COLOURS = {"high-high": "#b2182b", "low-low": "#2166ac", "high-low": "#f4a582", "low-high": "#92c5de",
                   "not significant": "#c8c8c8", "no neighbours": "#ffffff"}
CLUSTER_DARK = ("high-high", "low-low")  # hatched in PATTERN_INK_ON_DARK
CLUSTER_PATTERNS = {"high-high": "/", "low-low": "\\", "high-low": "|", "low-high": "-", "not significant": "",
                    "no neighbours": "."}
FONT = dict(family="DejaVu Sans, Arial, Helvetica, sans-serif", size=13, color="#222")


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


def scatter(**props) -> dict:
    """A scatter trace as a plain dict for `fig.add_trace`, which validates it once: a
    `go.Scatter` is validated when built and again when added (the output is the same)."""
    return dict(type="scatter", **props)


def legend_below(fig: go.Figure, px: int = 62) -> None:
    """Horizontal legend `px` pixels below the plot area (below the x-axis title)."""
    m = fig.layout.margin
    plot_h = (fig.layout.height or 450) - (m.t or 0) - (m.b or 0)
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-px / max(plot_h, 1), yanchor="top"))


def narrow_layout(extra: dict | None = None) -> dict:
    """Layout changes (plotly attribute paths) for a figure drawn under NARROW_PX: smaller type,
    thin side margins."""
    out = {"font.size": 11, "title.font.size": 12, "legend.font.size": 10, "margin.r": 10}
    out.update(extra or {})
    return out


# Labels next to markers

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
    marker_array = np.asarray(marker_boxes, float).reshape(-1, 4)
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
        # Only the boxes that reach this label's candidates: the others overlap by exactly 0.
        reach = np.asarray(list(boxes.values()), float)
        near_placed = [placed[j] for j in reaching(np.asarray(placed, float).reshape(-1, 4), reach)]
        near_markers = [marker_boxes[j] for j in reaching(marker_array, reach) if j != i]
        best, best_cost = "top center", float("inf")
        for rank, pos in enumerate(TEXT_POSITIONS):
            b = boxes[pos]
            cost = sum(overlap(b, p) for p in near_placed) * 3
            cost += sum(overlap(b, m) for m in near_markers)
            outside = (b[1] - b[0]) * (b[3] - b[2]) - overlap(b, (bx0, bx1, by0, by1))
            cost += 4 * outside + 0.5 * rank
            if cost < best_cost:
                best, best_cost = pos, cost
        out[i] = best
        placed.append(boxes[best])
    return out


def reaching(boxes: np.ndarray, candidates: np.ndarray) -> list[int]:
    """The indexes (in order) of the `boxes` (rows x0, x1, y0, y1) not wholly apart from the box
    enclosing the `candidates`. A box apart overlaps every candidate by exactly 0, so leaving it
    out of a sum of overlaps leaves the sum unchanged; a NaN coordinate keeps a box in."""
    x0, y0 = candidates[:, 0].min(), candidates[:, 2].min()
    x1, y1 = candidates[:, 1].max(), candidates[:, 3].max()
    apart = (boxes[:, 1] <= x0) | (boxes[:, 0] >= x1) | (boxes[:, 3] <= y0) | (boxes[:, 2] >= y1)
    return np.flatnonzero(~apart).tolist()
