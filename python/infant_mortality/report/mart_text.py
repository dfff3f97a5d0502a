"""The marts' own English texts (count bases, trend notes, unavailable reasons, audit
consequences) in the report's language.

The marts publish these texts once, in English, as the statistics write them; the report does
not recompute them, it translates them. Each text is a sequence of fragments joined by '; ',
each written by one template of the warehouse's code (statistics/trends.py,
statistics/trend_fitters/, the input models); `FRAGMENTS` pairs every template with its Spanish,
and the values inside (years, counts, codes) are carried over. A fragment no template matches is
shown as it is, and `untranslated()` lists it, so that a test can require that the texts of a
build all have their Spanish.
"""

from __future__ import annotations

import re

from infant_mortality.report.i18n import MESSAGES, language

# Why a rate is unavailable (fct_area_year_rates.unavailable_reason and the reasons inside notes).
REASONS_ES = {
    "negative_derived_count": "conteo derivado negativo",
    "no_live_births": "sin nacidos vivos",
    "deaths_exceed_births": "más defunciones que nacidos vivos",
    "implausible_rate": "tasa inverosímil",
    "implausible_births": "nacidos vivos inverosímiles",
    "commune_unknown": "comuna desconocida",
    "commune_year_missing": "falta la comuna en ese año",
    "live_births_missing": "faltan los nacidos vivos",
    "deaths_all_ages_missing": "faltan las defunciones de todas las edades",
    "deis_year_missing": "falta el año en el archivo DEIS",
    "deis_row_unreadable": "fila DEIS ilegible",
    "deis_1_plus_row_missing": "falta la fila DEIS de 1 año y más",
    "deis_age_groups_inconsistent": "grupos de edad DEIS incoherentes",
    "deis_row_unattributable": "fila DEIS sin comuna atribuible",
    "deaths_input_missing_year": "ningún archivo de defunciones tiene ese año",
    "births_input_missing_year": "ningún archivo de nacimientos tiene ese año",
    "region_incomplete": "región incompleta",
    "country_incomplete": "país incompleto",
    "region_commune_out_of_bounds": "una comuna de la región fuera de rango",
    "country_commune_out_of_bounds": "una comuna del país fuera de rango",
}


TEST_LABELS_ES = {"Poisson regression": "regresión de Poisson", "Joinpoint (NCI)": "Joinpoint (NCI)", "OLS": "MCO"}

_YEARS = r"(?P<years>\d{4}(?:-\d{4})?(?:, \d{4}(?:-\d{4})?)*)"
_NUMBER = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"


def _reasons(codes: str) -> str:
    return ", ".join(REASONS_ES.get(code, code) for code in codes.split(", "))


def _trend_es(words: str) -> str:
    """A trend class as a note writes it ('not estimable') by the report's own Spanish label."""
    return MESSAGES[f"trend.{words.replace(' ', '_')}"][0].lower()


def _decimal(number: str) -> str:
    return number.replace(".", ",")


# (English template as a regular expression, Spanish as a function of its groups). Ordered: the
# first that matches at the start of the remaining text wins.
FRAGMENTS: list[tuple[str, object]] = [
    # Count bases (int_input__commune_year_counts, macro deis_count_basis)
    (r"derived: INE deaths all ages - DEIS deaths aged 1\+",
     "derivadas: defunciones de todas las edades del INE menos defunciones de 1 año y más del DEIS"),
    (r"bias against MINSAL by region: (?P<mart>\w+)", "sesgo frente al MINSAL por región: {mart}"),
    (r"DEIS microdata: death and birth records", "microdatos DEIS: registros de defunciones y de nacimientos"),
    (r"DEIS microdata: death records", "microdatos DEIS: registros de defunciones"),
    (r"GENERATED DEIS-layout microdata \(synthetic\): death and birth records, not official figures",
     "microdatos GENERADOS con el formato DEIS (sintéticos): registros de defunciones y de nacimientos, "
     "no son cifras oficiales"),
    (r"GENERATED DEIS-layout microdata \(synthetic\): death records, not official figures",
     "microdatos GENERADOS con el formato DEIS (sintéticos): registros de defunciones, no son cifras oficiales"),
    (r"live births: bundled DEIS births by commune (?P<span>\d{4}-\d{4}) \((?P<file>[^)]+)\)",
     "nacidos vivos: nacimientos DEIS por comuna {span} incluidos en el proyecto ({file})"),
    # The births a rate used when not the registered ones (macro count_basis_with_births)
    (r"live births: DEIS-corrected \((?P<file>[^)]+)\)", "nacidos vivos: corregidos por el DEIS ({file})"),
    (r"live births: registered \(births_denominator corrected, but no DEIS-corrected figure here\)",
     "nacidos vivos: inscritos (births_denominator corrected, pero aquí no hay cifra corregida por el DEIS)"),
    (r"live births: DEIS-corrected where published \((?P<file>[^)]+)\), registered elsewhere \(births_basis\)",
     "nacidos vivos: corregidos por el DEIS donde se publican ({file}), inscritos en el resto (births_basis)"),
    # Data notes of every trend series (statistics/trends.py)
    (r"no data for " + _YEARS, "sin datos para {years}"),
    (r"rate unavailable \(NULL\) for " + _YEARS + r" \((?P<codes>[a-z_0-9, ]+)\)",
     lambda g: f"tasa no disponible para {g['years']} ({_reasons(g['codes'])})"),
    (r"rate unavailable \(NULL\) for " + _YEARS, "tasa no disponible para {years}"),
    (r"zero rate in " + _YEARS + r" \(log10 undefined, left out of the fit\)",
     "tasa cero en {years} (log10 no definido: fuera del ajuste)"),
    (r"zero rate in " + _YEARS + r" \(no births to add 0.5 death to, left out of the fit\)",
     "tasa cero en {years} (sin nacimientos a los que sumar 0,5 defunción: fuera del ajuste)"),
    (r"zero deaths in " + _YEARS + r": fitted at 0.5 death \(zero_rate_policy add_half_death\)",
     "cero defunciones en {years}: ajustado con 0,5 defunción (zero_rate_policy add_half_death)"),
    (r"insufficient data: (?P<deaths>\d+) deaths over the period, fewer than min_deaths = (?P<min>\d+) "
     r"\(a trend in the rate is not measurable\)",
     "datos insuficientes: {deaths} defunciones en el período, menos que min_deaths = {min} "
     "(no se puede medir una tendencia de la tasa)"),
    (r"not estimable: (?P<n>\d+) usable years, fewer than min_years = (?P<min>\d+)",
     "no estimable: {n} años utilizables, menos que min_years = {min}"),
    (r"not confirmed: p < the threshold \((?P<trend>increasing|decreasing)\), but the (?P<test>.+?) test of the "
     r"same series says (?P<other>[a-z ]+)",
     lambda g: (f"no confirmada: p bajo el umbral ({_trend_es(g['trend'])}), pero la prueba de "
                f"{TEST_LABELS_ES.get(g['test'], g['test'])} de la misma serie dice {_trend_es(g['other'])}")),
    # Prais-Winsten (statistics/trend_fitters/prais.py)
    (r"not estimable: the final transformed regression kept (?P<n>\d+) observations for 2 parameters "
     r"\(\|rho\| = (?P<rho>" + _NUMBER + r") >= 1 dropped the first of each run of years\)",
     lambda g: (f"no estimable: la regresión transformada final conservó {g['n']} observaciones para 2 "
                f"parámetros (|rho| = {_decimal(g['rho'])} >= 1 excluyó el primer año de cada tramo)")),
    (r"not estimable: the transformed regression fits exactly \(residual variance 0\)",
     "no estimable: la regresión transformada ajusta exactamente (varianza residual 0)"),
    (r"not estimable: \|rho\| = (?P<rho>" + _NUMBER + r") is not below trend_max_abs_rho = (?P<max>" + _NUMBER
     + r") \(an AR\(1\) fit this close to a unit root or beyond interpolates the points; its p-value means nothing\)",
     lambda g: (f"no estimable: |rho| = {_decimal(g['rho'])} no es menor que trend_max_abs_rho = "
                f"{_decimal(g['max'])} (un ajuste AR(1) tan cerca de una raíz unitaria, o más allá, interpola "
                "los puntos y su valor p no dice nada)")),
    (r"not estimable: rho did not converge in (?P<n>\d+) iterations \(the p-value depends on where the "
     r"iteration stopped\)",
     "no estimable: rho no convergió en {n} iteraciones (el valor p depende de dónde se detuvo)"),
    (r"not estimable: no residual degrees of freedom left in the transformed regression",
     "no estimable: la regresión transformada no deja grados de libertad residuales"),
    (r"not estimable: singular transformed regression \(rho = 1\)",
     "no estimable: regresión transformada singular (rho = 1)"),
    (r"years used are not consecutive: rho computations restarted at each gap \(Stata tsset convention\)",
     "los años usados no son consecutivos: el cálculo de rho se reinicia en cada salto (convención tsset de Stata)"),
    (r"years used are not consecutive: treated as consecutive observations",
     "los años usados no son consecutivos: se tratan como observaciones consecutivas"),
    (r"\|rho\| >= 1 \((?P<rho>" + _NUMBER + r")\): first observation dropped in the final fit \(Cochrane-Orcutt\)",
     lambda g: f"|rho| >= 1 ({_decimal(g['rho'])}): primera observación excluida del ajuste final (Cochrane-Orcutt)"),
    # Poisson regression and OLS (statistics/trend_fitters/poisson.py, ols.py)
    (r"not estimable: the Poisson likelihood has no finite maximum \(no deaths, or every death in the first "
     r"or in the last year\)",
     "no estimable: la verosimilitud de Poisson no tiene máximo finito (sin defunciones, o todas en el primer "
     "o en el último año)"),
    (r"not estimable: the Poisson fit did not converge in (?P<n>\d+) iterations",
     "no estimable: el ajuste de Poisson no convergió en {n} iteraciones"),
    (r"not estimable: no residual degrees of freedom left", "no estimable: no quedan grados de libertad residuales"),
    (r"not estimable: the Poisson model fits exactly \(Pearson chi2 = 0\)",
     "no estimable: el modelo de Poisson ajusta exactamente (chi2 de Pearson = 0)"),
    (r"not estimable: lag-1 autocorrelation of the Pearson residuals r = (?P<r>" + _NUMBER + r") >= 1",
     lambda g: f"no estimable: autocorrelación de rezago 1 de los residuos de Pearson r = {_decimal(g['r'])} >= 1"),
    (r"not estimable: the regression fits exactly \(residual variance 0\)",
     "no estimable: la regresión ajusta exactamente (varianza residual 0)"),
    # Joinpoint (statistics/joinpoint.py, statistics/trend_fitters/joinpoint.py)
    (r"not estimable: (?P<n>\d+) years, a trend needs at least 3",
     "no estimable: {n} años; una tendencia necesita al menos 3"),
    (r"not estimable: no deaths in any year, the log rate is undefined",
     "no estimable: ningún año tiene defunciones, el logaritmo de la tasa no está definido"),
    (r"not estimable: no deaths in " + _YEARS + r", the log rate is undefined",
     "no estimable: sin defunciones en {years}, el logaritmo de la tasa no está definido"),
    (r"not estimable: the model fits exactly \(residual variance 0\), so its standard errors are 0",
     "no estimable: el modelo ajusta exactamente (varianza residual 0), así que sus errores estándar son 0"),
    (r"no deaths in " + _YEARS + r": counted as 0.5 deaths, as NCI Joinpoint does",
     "sin defunciones en {years}: contadas como 0,5 defunciones, como hace NCI Joinpoint"),
    (r"at most (?P<k>\d+) joinpoint\(s\) \(the cap\), where NCI's rule allows (?P<asked>\d+) in (?P<n>\d+) years",
     "a lo más {k} punto(s) de inflexión (el tope), donde la regla del NCI permite {asked} en {n} años"),
    (r"at most (?P<k>\d+) joinpoint\(s\) fit in (?P<n>\d+) years with the distance rules \(asked (?P<asked>\d+)\)",
     "caben a lo más {k} punto(s) de inflexión en {n} años con las reglas de distancia (se pidieron {asked})"),
    (r"(?P<k>\d+) joinpoint\(s\) at (?P<at>\d{4}(?:, \d{4})*): the APC is the AAPC over the period "
     r"\(segments in fct_trend_segments\)",
     "{k} punto(s) de inflexión en {at}: el PCA es el PCAP del período (segmentos en fct_trend_segments)"),
    # Audit consequences shown in the report (audit rows that change a published figure)
    (r"no rate for this commune-year; its counts still enter the region and country sums \(bounded case: "
     r"docs/methods/core.md, \"Regions and the country\"\)",
     "sin tasa para esta comuna y año; sus conteos siguen entrando en las sumas de la región y del país "
     "(caso acotado: docs/methods/core.md, \"Regions and the country\")"),
    (r"left out of this stratifier's ranking, quintiles and measures in every area, and counted in "
     r"fct_inequality.n_communes_without_value",
     "fuera del orden, los quintiles y las medidas de este estratificador en todas las áreas; contada en "
     "fct_inequality.n_communes_without_value"),
    (r"no usable value for (?P<name>.+)", "sin valor utilizable para {name}"),
    (r"deaths=(?P<deaths>-?\d+) live_births=(?P<births>-?\d+)", "defunciones={deaths} nacidos_vivos={births}"),
]
_COMPILED = [(re.compile(pattern), spanish) for pattern, spanish in FRAGMENTS]


def _fragments(text: str) -> list[tuple[str, str | None]]:
    """(English fragment, its Spanish or None) for each '; '-joined fragment of ``text``."""
    out, rest = [], text
    while rest:
        for pattern, spanish in _COMPILED:
            match = pattern.match(rest)
            if match and (match.end() == len(rest) or rest.startswith("; ", match.end())):
                groups = match.groupdict()
                out.append((match.group(0), spanish(groups) if callable(spanish) else spanish.format(**groups)))
                rest = rest[match.end() + 2:]
                break
        else:
            head, _, rest = rest.partition("; ")
            out.append((head, None))
    return out


def localised(text: str | None) -> str | None:
    """``text`` (a mart's English text) in the report's language; a fragment with no Spanish
    template stays as it is."""
    if text is None or language() == "en":
        return text
    return "; ".join(spanish or english for english, spanish in _fragments(str(text)))


def untranslated(text: str) -> list[str]:
    """The fragments of ``text`` that have no Spanish template."""
    return [english for english, spanish in _fragments(text) if spanish is None]


def reason(code: str | None) -> str | None:
    """An unavailable reason's code in the report's language."""
    if code is None or language() == "en":
        return code
    return REASONS_ES.get(code, code)
