"""How the page writes numbers: JSON-friendly floats for plotly, numbers, p-values, intervals,
APCs and the unit of a rate, in the render's language (`context.current()`).

Numbers are passed to plotly as Python lists (never numpy arrays, which plotly would encode as
base64 typed arrays), so the figure JSON embedded in the report is readable and the tests can
check the values against the marts.
"""

from __future__ import annotations

import math

from infant_mortality.report.context import current
from infant_mortality.report.i18n import language, localise_number, percent, t


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


def fmt_cri(lo, hi, digits: int = 2) -> str:
    """A credible interval (BYM2's posterior quantiles): `ICr 95 % 6,90 a 8,00` / `95% CrI 6.90 to 8.00`."""
    return t("cri", level=t("ci.level"), lo=fmt(lo, digits), hi=fmt(hi, digits))


def fmt_bound(x, digits: int = 2) -> str:
    """A class bound without trailing zeros: `0,2`, `0,05` / `0.2`, `0.05`."""
    return fmt(x, digits).rstrip("0").rstrip(",.")


def fmt_apc(row) -> str:
    """`PCA (APC) −2,9 % (IC 95 % −4,1; −1,7)` or the trend's reason when it has no APC; the
    interval's level is the build's (the render context's)."""
    if row is None:
        return t("trend.none")
    apc = num(row.get("apc"))
    if apc is None:
        return t("apc.none")
    return t("apc", apc=fmt(apc, 1, signed=True), level=percent(current().trend_ci_level),
             lo=fmt(row.get("apc_ci95_lower"), 1, signed=True), hi=fmt(row.get("apc_ci95_upper"), 1, signed=True))


def fmt_apc_short(apc) -> str:
    return t("apc.short", apc=fmt(apc, 1, signed=True))


def multiplier_text(multiplier) -> str:
    """A rate's multiplier as the page writes it: `1.000`, `100.000` in Spanish; `1000`,
    `100,000` in English (no separator in a four-digit number)."""
    m = int(multiplier)
    if language() == "en" and m < 10_000:
        return str(m)
    return fmt(m, 0, thousands=True)


def unit(indicators) -> str:
    """The unit of the rates of `indicators` (one code or several) for the `{unit}` of the
    catalogue's texts: `1.000` (`por {unit} nacidos vivos`); several multipliers are joined
    (`1.000 o 100.000`). The multiplier is each indicator's (`marts.dim_indicator.multiplier`)."""
    codes = [indicators] if isinstance(indicators, str) else list(indicators)
    found = {code: current().indicator(code).multiplier for code in codes}
    unknown = sorted(code for code, m in found.items() if m is None)
    if unknown or not found:
        raise ValueError(f"no multiplier in marts.dim_indicator for the indicator(s) {unknown or codes}")
    return t("unit.or").join(multiplier_text(m) for m in sorted(set(found.values())))
