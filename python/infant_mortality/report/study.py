"""The study, reproduced: each result of the abstract of González, Alfaro & Horna-Campos (2020) as
`marts.fct_study_findings` checks it, one table row per statement: the study's value, this
warehouse's value for the same measure, the period it was computed over (and the years missing,
with why), and whether the statement holds or why it cannot be computed. Every value, period,
verdict and reason is the mart's; this module only writes them in the page's language."""

from __future__ import annotations

import pandas as pd

from infant_mortality.report.formats import fmt, fmt_apc, fmt_ci, fmt_p, num, unit
from infant_mortality.report.labels import trend_label
from infant_mortality.report.i18n import MESSAGES, localise_number, pick, t
from infant_mortality.report.tables import esc, table_box

HEADERS = ("study.col.statement", "study.col.study_value", "study.col.warehouse_value", "study.col.period",
           "study.col.verdict")


def reason_label(code: str) -> str:
    """A reason code of the mart (`deaths_not_in_input`) in the page's language; a code the
    catalogue does not know is shown as the mart writes it."""
    key = f"study.reason.{code}"
    return t(key) if key in MESSAGES else code


def reasons_text(spans: str | None) -> str:
    """`missing_years_reason` (`2005-2009: deaths_not_in_input; 2014: births_not_in_input`: every
    missing span with its reason) with each reason in words."""
    if not isinstance(spans, str) or not spans:
        return t("missing")
    parts = []
    for part in spans.split("; "):
        span, _, code = part.partition(": ")
        parts.append(f"{span}: {reason_label(code)}" if code else reason_label(span))
    return "; ".join(parts)


def study_value(row: dict) -> str:
    if row["finding_kind"] == "trend":
        return trend_label(row["study_trend"])
    value = num(row["study_value"])
    if value is None:
        return t("study.no_value")
    as_published = localise_number(f"{value:g}")  # the study's own digits: 12.7, 4.05
    if row["finding_kind"] == "rate_ratio":
        return t("study.rt", value=as_published)
    return t("study.rate", rate=as_published, unit=unit(row["indicator"]))


def warehouse_value(row: dict) -> str:
    value = num(row["warehouse_value"])
    if value is None:
        return t("missing")
    ci = fmt_ci(row["warehouse_ci95_lower"], row["warehouse_ci95_upper"])
    kind = row["finding_kind"]
    if kind == "rate_ratio":
        return t("study.value.rate_ratio", value=fmt(value), ci=ci)
    if kind == "trend":
        apc = fmt_apc({"apc": value, "apc_ci95_lower": row["warehouse_ci95_lower"],
                       "apc_ci95_upper": row["warehouse_ci95_upper"]})
        return t("study.value.trend", direction=trend_label(row["prais_direction"]).lower(), apc=apc,
                 p=fmt_p(row["prais_p_value"]))
    text = t("study.value.rate", commune=row["commune_name"], rate=fmt(value), ci=ci, unit=unit(row["indicator"]),
             rank=fmt(row["commune_rank"], 0), n=fmt(row["n_communes_ranked"], 0))
    if row["warehouse_commune_code"] != row["commune_code"]:
        text += "; " + t(f"study.value.{kind}", name=row["warehouse_commune_name"])
    return text


def period_text(row: dict) -> str:
    coverage = row["period_coverage"]
    if coverage == "study_period":
        return t("study.period.study", period=row["period_label"])
    if coverage == "overlap":
        return t("study.period.overlap", period=row["period_label"], reasons=reasons_text(row["missing_years_reason"]))
    return t("study.period.none", reasons=reasons_text(row["missing_years_reason"]))


def verdict(row: dict) -> str:
    if row["status"] == "not_computable":
        return t("study.not_computable", reason=reason_label(row["not_computable_reason"]))
    return t(f"study.{row['status']}")


def study_html(findings: pd.DataFrame, p_threshold: float) -> str:
    """The section: heading, caption, how many statements hold, and the table (a real table with
    a caption and column and row headers; on a phone its rows become cards, report.js/.css).
    `p_threshold`: the build's var trend_p_threshold, the study's rule for a trend."""
    head = f'<h2 id="study">{esc(t("study.heading"))}</h2>'
    if findings.empty:
        return head + f'<p class="note">{esc(t("study.none"))}</p>'
    rows = findings.sort_values("finding_id").to_dict("records")
    first = rows[0]
    counts = findings["status"].value_counts()
    summary = t("study.summary", n=len(rows), holds=int(counts.get("holds", 0)),
                does_not_hold=int(counts.get("does_not_hold", 0)),
                not_computable=int(counts.get("not_computable", 0)))
    header = "".join(f'<th scope="col">{esc(t(key))}</th>' for key in HEADERS)
    body = "".join(
        f'<tr data-finding="{int(r["finding_id"])}" data-status="{esc(r["status"])}">'
        f'<th scope="row">{esc(pick(r["statement_es"], r["statement_en"]))}</th>'
        f"<td>{esc(study_value(r))}</td><td>{esc(warehouse_value(r))}</td>"
        f"<td>{esc(period_text(r))}</td><td>{esc(verdict(r))}</td></tr>"
        for r in rows)
    table = (f'<table class="data study" id="study-findings"><caption>{esc(t("study.table"))}</caption>'
             f"<thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>")
    return "\n".join([
        head,
        f'<p class="caption">{t("study.caption", start=int(first["study_period_start"]), end=int(first["study_period_end"]), p=fmt(p_threshold, 2), unit=unit(findings["indicator"].unique()))}</p>',
        f"<p>{esc(summary)}</p>",
        table_box("study-findings", t("study.table"), table),
    ])
