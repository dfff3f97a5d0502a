"""The names the page gives to what the marts hold: indicators (`marts.dim_indicator`, through
the render context), the comparison, funnel and trend classes, the trend methods."""

from __future__ import annotations

from infant_mortality.report.context import Indicator, current
from infant_mortality.report.formats import fmt_bound
from infant_mortality.report.i18n import MESSAGES, language, pick, t
from infant_mortality.report.style import EXCEEDANCE_BOUNDS


def indicator_short(indicator: str) -> str:
    """`TMI` (Spanish) or `IMR` (English)."""
    i = current().indicator(indicator)
    return pick(i.abbreviation_es, i.abbreviation_en)


def indicator_long(indicator: str) -> str:
    """`TMI, tasa de mortalidad infantil` / `IMR, infant mortality rate`."""
    i = current().indicator(indicator)
    return t("indicator.long", abbr=pick(i.abbreviation_es, i.abbreviation_en), name=pick(i.name_es, i.name_en))


def indicator_ages(i: Indicator) -> str:
    return pick(i.ages_es, i.ages_en)


def indicator_order(codes) -> list[str]:
    """The codes in the report's order (dim_indicator's), unknown codes last, alphabetically."""
    codes = set(codes)
    known = [i.code for i in current().indicators if i.code in codes]
    return known + sorted(codes - set(known))


def comparison_label(cls: str) -> str:
    return t(f"comparison.{cls}")


def funnel_label(cls: str) -> str:
    return t(f"funnel.{cls}")


def trend_label(cls: str | None) -> str:
    """The trend class as the page names it (an unknown class as it is)."""
    key = f"trend.{cls or 'not_estimable'}"
    return t(key) if key in MESSAGES else str(cls)


def cluster_label(cluster_type: str) -> str:
    """A cluster type of `marts.fct_spatial_clusters` as the page names it; a type the catalogue
    does not know stops the report (the mart's constraint lists the types: the catalogue is behind)."""
    key = f"cluster.{cluster_type}"
    if key not in MESSAGES:
        raise ValueError(f"unknown cluster type {cluster_type!r} in marts.fct_spatial_clusters: add it to report/i18n.py")
    return t(key)


def exceedance_class_label(k: int) -> str:
    """The k-th class of the probability of exceeding (style.EXCEEDANCE_BOUNDS): `P < 0,05`,
    `P de 0,05 a 0,2`, ..., `P > 0,95`."""
    bounds = EXCEEDANCE_BOUNDS
    if k == 0:
        return t("map.exceedance_class.first", hi=fmt_bound(bounds[0]))
    if k == len(bounds):
        return t("map.exceedance_class.last", lo=fmt_bound(bounds[-1]))
    return t("map.exceedance_class.middle", lo=fmt_bound(bounds[k - 1]), hi=fmt_bound(bounds[k]))


def trend_has_class(row) -> bool:
    """Whether a trend row carries a class (a valid fit): only then are its class and APC shown."""
    return row is not None and row.get("trend") in ("increasing", "decreasing", "stationary")


def method_label(method: str, mart_label: str) -> str:
    """A trend method's name: the mart's (fct_trends.method_label, meta_build), in Spanish the catalogue's."""
    key = f"method.{method}"
    return t(key) if language() == "es" and key in MESSAGES else mart_label
