"""HTML tables of the report: every commune against its region (sortable, filtered by
indicator and period) and the data-quality findings."""

from __future__ import annotations

import html

import pandas as pd

from infant_mortality.report.common import fmt, fmt_p, indicator_short, num


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


COMPARISON_COLUMNS = [
    ("Commune", "commune_name", None),
    ("Code", "commune_code", None),
    ("Indicator", "indicator", None),
    ("Period", "period_label", None),
    ("Years", "n_years", 0),
    ("Deaths", "deaths", 0),
    ("Live births", "live_births", 0),
    ("Rate /1000", "rate_per_1000", 2),
    ("CI low", "ci95_lower", 2),
    ("CI high", "ci95_upper", 2),
    ("Region rate", "region_rate_per_1000", 2),
    ("RT", "rate_ratio", 2),
    ("RT CI low", "rate_ratio_ci95_lower", 2),
    ("RT CI high", "rate_ratio_ci95_upper", 2),
    ("RAP /1000", "excess_rate_per_1000", 2),
    ("RAP%", "attributable_percent", 1),
    ("Excess deaths", "excess_deaths", 1),
    ("RR vs rest", "rest_rate_ratio", 2),
    ("mid-p", "p_value", 3),
    ("vs rest", "comparison", None),
    ("Funnel", "funnel_category", None),
    ("Rank", "rank_in_region", 0),
    ("Unreliable", "is_unreliable", None),
]


def comparison_table(table_id: str, comparison: pd.DataFrame, combos) -> tuple[str, dict]:
    """The table's HTML (header and filter; the body is filled by report.js when the region is
    shown) and its rows: each row is [combo key, cells], a cell a text or [text, sort value,
    class]. Texts are formatted here, so the page and the table format numbers alike."""
    order = {c.key: i for i, c in enumerate(combos)}
    df = comparison.assign(
        _combo=[f"{r.indicator}|{int(r.period_start)}|{int(r.period_end)}" for r in comparison.itertuples()]
    )
    df = df.assign(_order=df["_combo"].map(order)).sort_values(["_order", "rank_in_region"])
    head = "".join(f"<th title='click to sort'>{esc(label)}</th>" for label, _, _ in COMPARISON_COLUMNS)
    rows = []
    for r in df.to_dict("records"):
        cells = []
        for _, col, digits in COMPARISON_COLUMNS:
            v = r[col]
            if col == "indicator":
                cells.append(indicator_short(v))
            elif col == "p_value":
                cells.append([fmt_p(v), num(v)])
            elif col == "is_unreliable":
                cells.append("yes" if v is True or v == 1 else "")
            elif col == "comparison":
                v = v if isinstance(v, str) else ""
                cells.append([v, None, v if v in ("higher", "lower") else None])
            elif digits is None:
                cells.append("" if v is None or (isinstance(v, float) and v != v) else str(v))
            else:
                signed = col in ("excess_rate_per_1000", "attributable_percent", "excess_deaths")
                cells.append([fmt(v, digits, signed=signed, thousands=digits == 0), num(v)])
        rows.append([r["_combo"], cells])
    options = "".join(
        f'<option value="{esc(c.key)}"{" selected" if i == 0 else ""}>{esc(c.label)}</option>'
        for i, c in enumerate(combos)
    ) + '<option value="">all indicators and periods</option>'
    html_ = (
        f'<p>Show: <select class="table-filter" data-table="{table_id}">{options}</select> '
        "(click a column header to sort)</p>"
        f'<div class="table-wrap"><table class="data sortable" id="{table_id}" data-rows="{table_id}-data">'
        f"<thead><tr>{head}</tr></thead><tbody></tbody></table></div>"
    )
    return html_, {"rows": rows}


def audit_html(audit: pd.DataFrame, communes: pd.DataFrame) -> str:
    names = dict(zip(communes.commune_code, communes.commune_name))
    affects = audit[audit["affects_results"].fillna(False).astype(bool)]
    others = audit[~audit["affects_results"].fillna(False).astype(bool)]
    cols = [("Check", "check_name"), ("Record", "record_key"), ("Commune", "commune_code"), ("Year", "year"),
            ("Indicator", "indicator"), ("Observed", "observed_value"), ("Records", "records_affected"),
            ("Consequence", "consequence"), ("Source", "source"), ("File", "source_file"), ("Line", "source_line")]
    out = []
    if affects.empty:
        out.append("<p>No data-quality finding changes any published number.</p>")
    else:
        head = "".join(f"<th>{esc(c)}</th>" for c, _ in cols)
        rows = []
        for r in affects.sort_values(["check_name", "commune_code", "year"], na_position="last").to_dict("records"):
            cells = []
            for _, col in cols:
                v = r.get(col)
                if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA:
                    cells.append("<td></td>")
                elif col == "commune_code":
                    cells.append(_cell(v, f"{names.get(v, '')} ({v})"))
                elif col in ("year", "records_affected", "source_line"):
                    cells.append(_cell(v, fmt(v, 0), numeric=True))
                else:
                    cells.append(_cell(v))
            rows.append(f"<tr>{''.join(cells)}</tr>")
        out.append(
            f"<p><b>{len(affects)}</b> finding(s) change published numbers:</p>"
            f'<div class="table-wrap"><table class="data sortable" id="audit-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )
    if others.empty:
        out.append("<p>No other findings.</p>")
    else:
        summary = others.groupby("check_name").agg(n=("check_name", "size"), records=("records_affected", "sum"))
        items = "".join(
            f"<li><code>{esc(name)}</code>: {int(r.n)} finding(s), {fmt(r.records, 0, thousands=True)} record(s)</li>"
            for name, r in summary.iterrows()
        )
        out.append(
            f"<p>{len(others)} other finding(s) are recorded in <code>marts.audit_data_quality</code> that do not "
            f"change any published number:</p><ul>{items}</ul>"
        )
    return "\n".join(out)


