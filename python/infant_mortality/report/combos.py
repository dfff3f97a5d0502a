"""The indicator x period combinations of a figure and its menu: each option a combination (or
a measure of one), toggling the visibility of the figure's traces.

A figure that shows several indicators / periods holds the traces of all of them and a menu
(`menu`: an HTML select the page puts above the figure, reachable by keyboard) toggling their
visibility; the first option is the default (the full window of the first indicator present).
Each trace carries a ``meta`` dict (region, indicator, period, ...) naming what it shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from infant_mortality.report.labels import indicator_order, indicator_short


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


def frames_by_combo(df: pd.DataFrame) -> dict:
    """`combo.select(df)` of every combo at once (one grouping, not three masks per combo)."""
    if not len(df):
        return {}
    groups = df.groupby(["indicator", "period_start", "period_end"], sort=False)
    return {Combo(ind, int(start), int(end)): rows for (ind, start, end), rows in groups}


def with_rate(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that have a pooled rate (a commune without live births in the period has none;
    the page lists those in a note)."""
    return df[df["rate_per_1000"].notna() & df["live_births"].notna()]


def rows_by_combo(df: pd.DataFrame) -> dict:
    """A mart's rows (as dicts) by (commune_code, indicator, period_start, period_end)."""
    return {(r["commune_code"], r["indicator"], int(r["period_start"]), int(r["period_end"])): r
            for r in df.to_dict("records")}


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
