"""HTML tables of the report: every commune against its region (sortable, filtered by
indicator and period) and the data-quality findings."""

from __future__ import annotations

import html

import pandas as pd

from infant_mortality.report.formats import fmt, fmt_p, num, unit
from infant_mortality.report.labels import funnel_label, indicator_short
from infant_mortality.report.i18n import t
from infant_mortality.report.mart_text import localised


def esc(x) -> str:
    return html.escape("" if x is None else str(x))


def _cell(value, text=None, numeric=False, cls=None) -> str:
    sort = ""
    if numeric:
        v = num(value)
        sort = f' data-sort="{"" if v is None else repr(v)}"'
    classes = " ".join(c for c in ("num" if numeric else None, cls) if c)
    cls_attr = f' class="{classes}"' if classes else ""
    return f"<td{cls_attr}{sort}>{esc(text if text is not None else value)}</td>"


# (mart column, digits or None for text, shown by default). The column chooser shows the others.
COMPARISON_COLUMNS = [
    ("commune_name", None, True),
    ("commune_code", None, False),
    ("indicator", None, False),
    ("period_label", None, False),
    ("n_years", 0, False),
    ("deaths", 0, True),
    ("live_births", 0, True),
    ("rate_per_1000", 2, True),
    ("ci95_lower", 2, True),
    ("ci95_upper", 2, True),
    ("region_rate_per_1000", 2, False),
    ("rate_ratio", 2, True),
    ("rate_ratio_ci95_lower", 2, False),
    ("rate_ratio_ci95_upper", 2, False),
    ("excess_rate_per_1000", 2, False),
    ("attributable_percent", 1, False),
    ("excess_deaths", 1, True),
    ("rest_rate_ratio", 2, False),
    ("p_value", 3, True),
    ("comparison", None, True),
    ("funnel_category", None, False),
    ("rank_in_region", 0, True),
    ("is_unreliable", None, True),
]


def column_chooser(table_id: str, columns: list[tuple[str, bool]]) -> str:
    """Checkboxes that show or hide a table's columns (report.js); `columns`: (label, shown)."""
    boxes = "".join(
        f'<label><input type="checkbox" data-table="{table_id}" data-col="{i}"{" checked" if shown else ""}> '
        f"{esc(label)}</label>"
        for i, (label, shown) in enumerate(columns)
    )
    return (f'<details class="column-chooser"><summary>{esc(t("table.columns"))} '
            f'<span class="hint">({esc(t("table.columns_hint"))})</span></summary>'
            f'<div class="columns">{boxes}</div></details>')


def table_box(table_id: str, label: str, table_html: str) -> str:
    """A table in a box that scrolls (keyboard-focusable, named, with a hint shown by report.js when
    the box has more than it shows)."""
    return (f'<div class="table-wrap" tabindex="0" role="region" aria-label="{esc(label)}" '
            f'data-hint-for="{table_id}">{table_html}</div><p class="scroll-hint" id="{table_id}-hint" hidden></p>')


def comparison_table(table_id: str, comparison: pd.DataFrame, combos, region_name: str) -> tuple[str, dict]:
    """The table's HTML (header and filter; the body is filled by report.js when the region is
    shown) and its rows: each row is [combo key, cells], a cell a text or [text, sort value,
    class]. Texts are formatted here, so the page and the table format numbers alike."""
    order = {c.key: i for i, c in enumerate(combos)}
    df = comparison.assign(
        _combo=[f"{r.indicator}|{int(r.period_start)}|{int(r.period_end)}" for r in comparison.itertuples()]
    )
    df = df.assign(_order=df["_combo"].map(order)).sort_values(["_order", "rank_in_region"])
    rate_unit = unit(c.indicator for c in combos)  # the unit of the rate columns
    head = "".join(f'<th scope="col" title="{esc(t("table.sort"))}">{esc(t(f"col.{col}", unit=rate_unit))}</th>'
                   for col, _, _ in COMPARISON_COLUMNS)
    rows = []
    for r in df.to_dict("records"):
        cells = []
        for col, digits, _ in COMPARISON_COLUMNS:
            v = r[col]
            if col == "indicator":
                cells.append(indicator_short(v))
            elif col == "p_value":
                cells.append([fmt_p(v), num(v)])
            elif col == "is_unreliable":
                cells.append(t("yes") if v is True or v == 1 else "")
            elif col == "comparison":
                v = v if isinstance(v, str) else ""
                cells.append([t(f"comparison.short.{v}") if v else "", None, v if v in ("higher", "lower") else None])
            elif col == "funnel_category":
                cells.append(funnel_label(v) if isinstance(v, str) else "")
            elif digits is None:
                cells.append("" if v is None or (isinstance(v, float) and v != v) else str(v))
            else:
                signed = col in ("excess_rate_per_1000", "attributable_percent", "excess_deaths")
                cells.append([fmt(v, digits, signed=signed, thousands=digits == 0), num(v)])
        rows.append([r["_combo"], cells])
    options = "".join(
        f'<option value="{esc(c.key)}"{" selected" if i == 0 else ""}>{esc(c.label)}</option>'
        for i, c in enumerate(combos)
    ) + f'<option value="">{esc(t("table.all"))}</option>'
    table = (f'<table class="data sortable" id="{table_id}" data-rows="{table_id}-data">'
             f"<thead><tr>{head}</tr></thead><tbody></tbody></table>")
    html_ = (
        f'<p><label for="{table_id}-filter">{esc(t("table.show"))}:</label> '
        f'<select id="{table_id}-filter" class="table-filter" data-table="{table_id}">{options}</select> '
        f"{esc(t('table.sort_hint'))}</p>"
        + column_chooser(table_id, [(t(f"col.{col}", unit=rate_unit), shown) for col, _, shown in COMPARISON_COLUMNS])
        + table_box(table_id, t("table.label", region=region_name), table)
    )
    return html_, {"rows": rows}


def audit_html(audit: pd.DataFrame, communes: pd.DataFrame) -> str:
    names = dict(zip(communes.commune_code, communes.commune_name))
    affects = audit[audit["affects_results"].fillna(False).astype(bool)]
    others = audit[~audit["affects_results"].fillna(False).astype(bool)]
    # (mart column, shown by default)
    cols = [("check_name", True), ("record_key", False), ("commune_code", True), ("year", True), ("indicator", True),
            ("observed_value", False), ("records_affected", True), ("consequence", True), ("source", False),
            ("source_file", False), ("source_line", False)]
    label = {"commune_code": "col.commune"}
    out = []
    if affects.empty:
        out.append(f"<p>{esc(t('audit.none'))}</p>")
    else:
        head = "".join(f'<th scope="col">{esc(t(label.get(c, f"col.{c}")))}</th>' for c, _ in cols)
        rows = []
        for r in affects.sort_values(["check_name", "commune_code", "year"], na_position="last").to_dict("records"):
            cells = []
            for col, _ in cols:
                v = r.get(col)
                if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA:
                    cells.append("<td></td>")
                elif col == "commune_code":
                    cells.append(_cell(v, f"{names.get(v, '')} ({v})"))
                elif col in ("consequence", "observed_value"):
                    cells.append(_cell(localised(v)))
                elif col in ("year", "records_affected", "source_line"):
                    cells.append(_cell(v, fmt(v, 0), numeric=True))
                else:
                    cells.append(_cell(v))
            rows.append(f"<tr>{''.join(cells)}</tr>")
        table = (f'<table class="data sortable" id="audit-table"><thead><tr>{head}</tr></thead>'
                 f"<tbody>{''.join(rows)}</tbody></table>")
        out.append(f"<p>{t('audit.affects', n=len(affects))}</p>"
                   + column_chooser("audit-table", [(t(label.get(c, f"col.{c}")), shown) for c, shown in cols])
                   + table_box("audit-table", t("quality.heading"), table))
    if others.empty:
        out.append(f"<p>{esc(t('audit.no_others'))}</p>")
    else:
        summary = others.groupby("check_name").agg(n=("check_name", "size"), records=("records_affected", "sum"))
        items = "".join(
            f"<li>{t('audit.other_item', name=esc(name), n=int(r.n), records=fmt(r.records, 0, thousands=True))}</li>"
            for name, r in summary.iterrows()
        )
        out.append(f"<p>{t('audit.others', n=len(others))}</p><ul>{items}</ul>")
    return "\n".join(out)


