"""The report's languages: the one catalogue of every text the page shows, and the number format.

Spanish is the default (`--lang es`), English the other (`--lang en`). Every label, caption,
tooltip, menu and message of the page is a key of MESSAGES with its Spanish and English text
(a `str.format` template); the names of indicators and stratifiers come from the marts'
`name_es` / `name_en` columns, never from here. Spanish terms follow the study and Chilean
public-health usage (TMI, RT, RAP, "por 1.000 nacidos vivos"). Numbers: in Spanish a decimal
comma and a point between thousands (7,44; 250.643), as in Chilean publications; in English the
reverse. The messages report.js needs (notices, the scroll hint) are embedded in the page as JSON
(`js_messages`).
"""

from __future__ import annotations

from infant_mortality.report.context import DEFAULT_LANGUAGE, LANGUAGES, current

__all__ = ["DEFAULT_LANGUAGE", "LANGUAGES", "MESSAGES", "js_messages", "language", "localise_number", "percent",
           "pick", "separators", "t"]


def language() -> str:
    """The language of the render under way (`context.current()`)."""
    return current().language


def t(key: str, **values) -> str:
    """The message `key` in the current language, with `values` filled in."""
    es, en = MESSAGES[key]
    return (es if language() == "es" else en).format(**values)


def percent(level: float) -> str:
    """A confidence level as the page writes it: `95 %` / `95%`."""
    return t("percent", value=localise_number(format(100 * level, "g")))


def pick(es: str | None, en: str | None) -> str | None:
    """Of a mart's Spanish and English columns, the current language's (the other if it is empty)."""
    first, second = (es, en) if language() == "es" else (en, es)
    return first if first else second


def separators() -> str:
    """plotly's `layout.separators` (decimal mark, then the thousands mark)."""
    return ",." if language() == "es" else ".,"


def localise_number(text: str) -> str:
    """A number written by Python's format (`1,234.5`) in the current language (`1.234,5`)."""
    if language() == "en":
        return text
    return text.replace(",", "\0").replace(".", ",").replace("\0", ".")


def js_messages() -> dict[str, str]:
    """The messages report.js shows, in the current language (their {placeholders} are filled there)."""
    idx = 0 if language() == "es" else 1
    return {key[3:]: texts[idx] for key, texts in MESSAGES.items() if key.startswith("js.")}


# key: (Spanish, English). Grouped by where they appear.
MESSAGES: dict[str, tuple[str, str]] = {
    # Numbers, indicators, periods
    "missing": ("–", "–"),
    "indicator.long": ("{abbr}, tasa de {name}", "{abbr}, {name} rate"),
    "per_1000.short": ("por {unit}", "per {unit}"),
    # A rate's unit is its indicator's multiplier (formats.unit: `{unit}` is 1.000 / 1000, 100.000 / 100,000);
    # the units of several indicators are joined by this.
    "unit.or": (" o ", " or "),
    "percent": ("{value} %", "{value}%"),
    "ci": ("IC {level} {lo} a {hi}", "{level} CI {lo} to {hi}"),
    "ci.level": ("95 %", "95%"),
    "apc": ("PCA (APC) {apc} % (IC {level} {lo}; {hi})", "APC {apc}% ({level} CI {lo}; {hi})"),
    "apc.short": ("PCA (APC) {apc} %", "APC {apc}%"),
    "apc.none": ("PCA no estimable", "APC not estimable"),
    "trend.none": ("tendencia no disponible", "trend not available"),
    "yes": ("sí", "yes"),
    # Classes of the marts
    "comparison.higher": ("Significativamente mayor que el resto de la región",
                          "Significantly higher than the rest of the region"),
    "comparison.lower": ("Significativamente menor que el resto de la región",
                         "Significantly lower than the rest of the region"),
    "comparison.similar": ("Sin diferencia significativa", "No significant difference"),
    "comparison.untested": ("Sin comparación (no está en el mart)", "Not tested (no comparison in the mart)"),
    "comparison.short.higher": ("mayor", "higher"),
    "comparison.short.lower": ("menor", "lower"),
    "comparison.short.similar": ("similar", "similar"),
    "comparison.short.untested": ("sin comparación", "untested"),
    "funnel.above_99_8": ("Sobre el límite de 99,8 % (▲)", "Above the 99.8% limit (▲)"),
    "funnel.above_95": ("Sobre el límite de 95 % (△)", "Above the 95% limit (△)"),
    "funnel.within": ("Dentro de los límites (●)", "Within the limits (●)"),
    "funnel.below_95": ("Bajo el límite de 95 % (▽)", "Below the 95% limit (▽)"),
    "funnel.below_99_8": ("Bajo el límite de 99,8 % (▼)", "Below the 99.8% limit (▼)"),
    "funnel.uncategorised": ("Sin categoría en el mart", "No funnel category in the mart"),
    "trend.increasing": ("Creciente", "Increasing"),
    "trend.decreasing": ("Decreciente", "Decreasing"),
    "trend.stationary": ("Estacionaria", "Stationary"),
    "trend.not_estimable": ("No estimable", "Not estimable"),
    "trend.insufficient_data": ("Datos insuficientes", "Insufficient data"),
    "trend.reason.insufficient_data": ("< {n} defunciones", "< {n} deaths"),
    "trend.reason.not_estimable": ("sin ajuste válido", "no valid fit"),
    "trend.not_confirmed": ("No confirmada", "Not confirmed"),
    "trend.reason.not_confirmed": ("el modelo de conteo no la confirma", "the count model does not confirm it"),
    "trends.other": ("{method}: {apc}", "{method}: {apc}"),
    "trends.disagree": (" ({cls})", " ({cls})"),
    "trends.joinpoints": ("punto de inflexión (joinpoint): {years}", "joinpoint: {years}"),
    "trends.segment": ("tramo {start}-{end}: {apc}", "segment {start}-{end}: {apc}"),
    "gap.widened": ("se amplió", "widened"),
    "gap.narrowed": ("se redujo", "narrowed"),
    "gap.held": ("se mantuvo", "held"),
    "gap.not_estimable": ("no estimable", "not estimable"),
    "gap.not_confirmed": ("cambio no confirmado", "change not confirmed"),
    "gap.insufficient_data": ("datos insuficientes", "insufficient data"),
    # Figure menus (HTML selects)
    "menu.combo": ("Indicador y período", "Indicator and period"),
    "menu.map": ("Medida en el mapa", "Measure on the map"),
    "menu.inequity": ("Indicador y estratificador", "Indicator and stratifier"),
    # Ranking
    "ranking.title": ("{combo}: tasa acumulada por {unit} nacidos vivos<br>{region}",
                      "{combo}: pooled rate per {unit} live births<br>{region}"),
    "ranking.region_line": ("Región {rate}", "Region {rate}"),
    "ranking.legend.region": ("Tasa acumulada regional (línea discontinua; banda gris: su IC 95 %)",
                              "Regional pooled rate (dashed line; grey band: its 95% CI)"),
    "ranking.legend.unreliable": ("Marcador vacío: menos de {n} defunciones (poco confiable)",
                                  "Open marker: fewer than {n} deaths (unreliable)"),
    "ranking.xaxis": ("Tasa por {unit} nacidos vivos (punto e IC exacto de Poisson 95 %)",
                      "Rate per {unit} live births (point and exact Poisson 95% CI)"),
    "ranking.xaxis.narrow": ("Tasa por {unit} nacidos vivos (IC 95 %)", "Rate per {unit} live births (95% CI)"),
    "ranking.hover": (
        "<b>%{{customdata[0]}}</b> (lugar %{{customdata[12]}} de {n})<br>{combo}: %{{x:.2f}} por {unit} nacidos vivos"
        "<br>IC 95 % %{{customdata[1]:.2f}} a %{{customdata[2]:.2f}}<br>defunciones %{{customdata[3]:,}} / nacidos "
        "vivos %{{customdata[4]:,}} (%{{customdata[13]}} años)<br>RT (razón de tasas) %{{customdata[5]:.2f}} "
        "(IC 95 % %{{customdata[6]:.2f}} a %{{customdata[7]:.2f}})<br>RAP %{{customdata[8]:+.2f}} por {unit} · "
        "RAP% %{{customdata[9]:+.1f}} %<br>frente al resto de la región: %{{customdata[11]}} "
        "(p medio %{{customdata[10]:.3f}})<extra></extra>",
        "<b>%{{customdata[0]}}</b> (rank %{{customdata[12]}} of {n})<br>{combo}: %{{x:.2f}} per {unit} live births"
        "<br>95% CI %{{customdata[1]:.2f}} to %{{customdata[2]:.2f}}<br>deaths %{{customdata[3]:,}} / live births "
        "%{{customdata[4]:,}} (%{{customdata[13]}} years)<br>RT (rate ratio) %{{customdata[5]:.2f}} "
        "(95% CI %{{customdata[6]:.2f}} to %{{customdata[7]:.2f}})<br>RAP (excess rate) %{{customdata[8]:+.2f}} per "
        "{unit} · RAP% %{{customdata[9]:+.1f}}%<br>vs rest of region: %{{customdata[11]}} "
        "(mid-p %{{customdata[10]:.3f}})<extra></extra>"),
    # Funnel
    "funnel.title.exact": ("{combo}: gráfico de embudo, límites exactos de Poisson{dispersion}<br>frente a la tasa "
                           "regional, {region}",
                           "{combo}: funnel plot, exact Poisson limits{dispersion}<br>against the regional rate, "
                           "{region}"),
    "funnel.title.adjusted": ("{combo}: gráfico de embudo, límites ajustados por sobredispersión{dispersion}<br>"
                              "frente a la tasa regional, {region}",
                              "{combo}: funnel plot, limits adjusted for over-dispersion{dispersion}<br>against the "
                              "regional rate, {region}"),
    "funnel.dispersion": (" (φ = {phi}; τ² = {tau2})", " (φ = {phi}; τ² = {tau2})"),
    "funnel.option.exact": ("{combo} · límites exactos", "{combo} · exact limits"),
    "funnel.option.adjusted": ("{combo} · ajustados por sobredispersión", "{combo} · adjusted for over-dispersion"),
    "menu.funnel": ("Indicador, período y límites", "Indicator, period and limits"),
    "funnel.limits_95": ("Límites de control de 95 %", "95% control limits"),
    "funnel.limits_998": ("Límites de control de 99,8 %", "99.8% control limits"),
    "funnel.region": ("Tasa regional", "Regional rate"),
    "funnel.region.hover": ("Tasa acumulada regional {rate} por {unit}", "Regional pooled rate {rate} per {unit}"),
    "funnel.xaxis": ("Nacidos vivos en el período (escala logarítmica)", "Live births in the period (log scale)"),
    "funnel.yaxis": ("Tasa acumulada por {unit} nacidos vivos", "Pooled rate per {unit} live births"),
    "funnel.hover": ("<b>{name}</b><br>{combo}: {rate} por {unit} ({ci})<br>defunciones {deaths} / nacidos vivos "
                     "{births}<br>RT {rt} · {category}",
                     "<b>{name}</b><br>{combo}: {rate} per {unit} ({ci})<br>deaths {deaths} / live births {births}"
                     "<br>RT {rt} · {category}"),
    # Map
    "map.crude": ("Tasa bruta", "Crude rate"),
    "map.smoothed": ("Tasa suavizada (Bayes empírico)", "Smoothed rate (EB)"),
    "map.rate_ratio": ("RT", "RT"),
    "map.exceedance": ("P(tasa > región)", "P(rate > region)"),
    "map.option": ("{measure}: {combo}", "{measure}: {combo}"),
    "map.title": ("{measure}, {combo}<br>{region}; contorno negro grueso: {what}",
                  "{measure}, {combo}<br>{region}; thick black outline: {what}"),
    "map.what.significant": ("significativamente distinta del resto de la región",
                             "significantly different from the rest of the region"),
    "map.what.exceedance": ("P(tasa > región) > {cut}", "P(rate > region) > {cut}"),
    "map.trend.option": ("Tendencia {period}: {ind}", "Trend {period}: {ind}"),
    "map.trend.title": ("Clase de tendencia {period} ({method}), {ind}<br>{region}; tramas: / creciente, "
                        "\\ decreciente, · no estimable",
                        "Trend class {period} ({method}), {ind}<br>{region}; hatching: / increasing, "
                        "\\ decreasing, · not estimable"),
    "map.trend.legend": ("Tendencia {cls}", "{cls} trend"),
    "map.bar.rate": ("por {unit}", "per {unit}"),
    "map.bar.exceedance": ("P(>región)", "P(>region)"),
    "map.hover.no_rate": ("<b>{name}</b><br>sin tasa acumulada en {period}", "<b>{name}</b><br>no pooled rate in {period}"),
    "map.hover": ("<b>{name}</b> · {combo}<br>bruta {rate} por {unit} ({ci})<br>suavizada (BE) {eb} · "
                  "P(tasa > región) {prob}<br>RT {rt} ({rt_ci})<br>frente al resto de la región: {comparison} "
                  "(p medio {p})<br>{trend}",
                  "<b>{name}</b> · {combo}<br>crude {rate} per {unit} ({ci})<br>smoothed (EB) {eb} · "
                  "P(rate > region) {prob}<br>RT {rt} ({rt_ci})<br>vs rest of region: {comparison} (mid-p {p})"
                  "<br>{trend}"),
    "map.hover.trend": ("tendencia: {cls}, {apc}", "trend: {cls}, {apc}"),
    "map.hover.trend_none": ("tendencia: ninguna", "trend: none"),
    "map.enlarged_right": ("ampliada a la derecha", "enlarged at right"),
    "map.enlarged_below": ("ampliada abajo", "enlarged below"),
    "map.core": ("Núcleo denso, ampliado", "Dense core, enlarged"),
    "map.whole": ("Toda la región", "Whole region"),
    # Map: BYM2 and clusters (bym2_clusters.py)
    "map.bym2": ("Tasa suavizada (BYM2)", "Smoothed rate (BYM2)"),
    "map.bym2_exceedance": ("P(tasa > región), BYM2", "P(rate > region), BYM2"),
    "map.clusters": ("Conglomerados (Moran local)", "Clusters (local Moran)"),
    "map.what.bym2": ("P(tasa > región) BYM2 > {cut}", "BYM2 P(rate > region) > {cut}"),
    "map.what.clusters": ("conglomerado con q ≤ {alpha} (FDR)", "cluster at q ≤ {alpha} (FDR)"),
    "map.island": ("sin vecinos: solo componente no estructurado", "no neighbours: unstructured part only"),
    "map.no_estimate": ("sin estimación", "no estimate"),
    "map.no_value": ("sin valor", "no value"),
    "map.exceedance_class.first": ("P < {hi}", "P < {hi}"),
    "map.exceedance_class.middle": ("P de {lo} a {hi}", "P {lo} to {hi}"),
    "map.exceedance_class.last": ("P > {lo}", "P > {lo}"),
    "map.hover.bym2": ("BYM2 {rate} ({cri}) · P(tasa > región) {prob}",
                       "BYM2 {rate} ({cri}) · P(rate > region) {prob}"),
    "map.hover.cluster": ("conglomerado (Moran local): {type}{q}", "cluster (local Moran): {type}{q}"),
    "cluster.high-high": ("alto-alto (foco caliente)", "high-high (hot spot)"),
    "cluster.low-low": ("bajo-bajo (foco frío)", "low-low (cold spot)"),
    "cluster.high-low": ("alto-bajo (alta entre bajas)", "high-low (high among low)"),
    "cluster.low-high": ("bajo-alto (baja entre altas)", "low-high (low among high)"),
    "cluster.not significant": ("no significativo", "not significant"),
    "cluster.no neighbours": ("sin vecinos", "no neighbours"),
    "cri": ("ICr {level} {lo} a {hi}", "{level} CrI {lo} to {hi}"),
    # Trends
    "trends.region_suffix": ("{name} (región)", "{name} (region)"),
    "trends.country_suffix": ("{name} (país)", "{name} (country)"),
    "trends.hover.rate": ("<b>{name}</b> %{{x}}<br>{ind} %{{y:.2f}} por {unit}<br>IC 95 % %{{customdata[0]:.2f}} a "
                          "%{{customdata[1]:.2f}}<br>defunciones %{{customdata[2]:,}} / nacidos vivos "
                          "%{{customdata[3]:,}}<extra></extra>",
                          "<b>{name}</b> %{{x}}<br>{ind} %{{y:.2f}} per {unit}<br>95% CI %{{customdata[0]:.2f}} to "
                          "%{{customdata[1]:.2f}}<br>deaths %{{customdata[2]:,}} / live births "
                          "%{{customdata[3]:,}}<extra></extra>"),
    "trends.hover.fit": ("<b>{name}</b>: ajuste de {method}, {cls}<br>{apc}<br>p = {p}, rho = {rho}<extra></extra>",
                         "<b>{name}</b>: {method} fit, {cls}<br>{apc}<br>p = {p}, rho = {rho}<extra></extra>"),
    # Spanish names of the trend methods (English: the mart's fct_trends.method_label).
    "method.poisson": ("regresión de Poisson", "Poisson regression"),
    "method.joinpoint": ("joinpoint (NCI)", "Joinpoint (NCI)"),
    # Inequity
    "inequity.measure.D": ("D, diferencia de tasas q1 − q5 (por {unit})", "D, rate difference q1 − q5 (per {unit})"),
    "inequity.measure.R": ("R, razón de tasas q1 / q5", "R, rate ratio q1 / q5"),
    "inequity.measure.PAR": ("RAP, tasa del área − tasa de q5 (por {unit})", "PAR, area rate − q5 rate (per {unit})"),
    "inequity.measure.PAF": ("FAP, % de la tasa del área", "PAF, % of the area's rate"),
    "inequity.measure.avoidable_deaths": ("Defunciones evitables (a la tasa de q5)", "Avoidable deaths (at the q5 rate)"),
    "inequity.measure.SII": ("SII, índice de desigualdad de la pendiente (por {unit})",
                             "SII, slope index of inequality (per {unit})"),
    "inequity.measure.RII": ("RII, índice relativo de desigualdad", "RII, relative index of inequality"),
    "inequity.measure.CIX": ("CIX, índice de concentración", "CIX, concentration index"),
    "inequity.hover.quintile": ("quintil %{{x}}: %{{y:.2f}} por {unit}<br>%{{customdata[0]}} comunas, "
                                "%{{customdata[1]:,}} defunciones / %{{customdata[2]:,}} nacidos vivos<extra></extra>",
                                "quintile %{{x}}: %{{y:.2f}} per {unit}<br>%{{customdata[0]}} communes, "
                                "%{{customdata[1]:,}} deaths / %{{customdata[2]:,}} births<extra></extra>"),
    "inequity.hover.commune": ("<b>%{{text}}</b><br>privación %{{x:.1f}}<br>tasa %{{y:.2f}} por {unit}<extra></extra>",
                               "<b>%{{text}}</b><br>deprivation %{{x:.1f}}<br>rate %{{y:.2f}} per {unit}<extra></extra>"),
    "inequity.hover.gradient": ("gradiente ajustado %{{y:.2f}} por {unit}<extra></extra>",
                                "fitted gradient %{{y:.2f}} per {unit}<extra></extra>"),
    "inequity.hover.rii": ("%{{x}}: RII %{{y:.2f}}<extra></extra>", "%{{x}}: RII %{{y:.2f}}<extra></extra>"),
    "inequity.no_trend": ("sin tendencia", "no trend"),
    "inequity.trend": ("{cls}, {apc}: la brecha {gap}", "{cls}, {apc}: the gap {gap}"),
    "inequity.option": ("{ind} · {strat}", "{ind} · {strat}"),
    "inequity.title": ("{ind} {period} según {strat}<br>{area}", "{ind} {period} by {strat}<br>{area}"),
    "inequity.rii_title": ("RII anual; tendencia: {trend}", "Yearly RII; trend: {trend}"),
    "inequity.panel.quintiles": ("Tasa por quintil (1 = más privado)", "Rate by quintile (1 = most deprived)"),
    "inequity.panel.communes": ("Comunas y gradiente ajustado de Poisson", "Communes and the fitted Poisson gradient"),
    "inequity.axis.quintile": ("quintil", "quintile"),
    "inequity.axis.deprivation": ("privación (mayor = más privada)", "deprivation (higher = more deprived)"),
    "inequity.table.intro": ("{ind} {period}: estimación (IC 95 %) por estratificador, de "
                             "<code>marts.fct_inequality</code> y <code>marts.fct_inequality_trends</code>.",
                             "{ind} {period}: estimate (95% CI) by stratifier, from <code>marts.fct_inequality</code> "
                             "and <code>marts.fct_inequality_trends</code>."),
    "inequity.table.measure": ("Medida", "Measure"),
    "inequity.table.label": ("Medidas de desigualdad, {area}", "Inequality measures, {area}"),
    "table.label": ("Cada comuna frente a la región, {region}", "Every commune against the region, {region}"),
    "inequity.table.gap": ("Tendencia del RII anual: la brecha", "Yearly RII trend: the gap"),
    "inequity.estimate": ("{est} ({lo} a {hi})", "{est} ({lo} to {hi})"),
    # Tables
    "col.commune_name": ("Comuna", "Commune"),
    "col.commune_code": ("Código", "Code"),
    "col.indicator": ("Indicador", "Indicator"),
    "col.period_label": ("Período", "Period"),
    "col.n_years": ("Años", "Years"),
    "col.deaths": ("Defunciones", "Deaths"),
    "col.live_births": ("Nacidos vivos", "Live births"),
    "col.rate_per_1000": ("Tasa /{unit}", "Rate /{unit}"),
    "col.ci95_lower": ("IC inf.", "CI low"),
    "col.ci95_upper": ("IC sup.", "CI high"),
    "col.region_rate_per_1000": ("Tasa regional", "Region rate"),
    "col.rate_ratio": ("RT", "RT"),
    "col.rate_ratio_ci95_lower": ("RT IC inf.", "RT CI low"),
    "col.rate_ratio_ci95_upper": ("RT IC sup.", "RT CI high"),
    "col.excess_rate_per_1000": ("RAP /{unit}", "RAP /{unit}"),
    "col.attributable_percent": ("RAP%", "RAP%"),
    "col.excess_deaths": ("Defunciones en exceso", "Excess deaths"),
    "col.rest_rate_ratio": ("RT frente al resto", "RR vs rest"),
    "col.p_value": ("p medio", "mid-p"),
    "col.comparison": ("Frente al resto", "vs rest"),
    "col.funnel_category": ("Embudo", "Funnel"),
    "col.rank_in_region": ("Lugar", "Rank"),
    "col.is_unreliable": ("Poco confiable", "Unreliable"),
    "col.check_name": ("Control", "Check"),
    "col.record_key": ("Registro", "Record"),
    "col.commune": ("Comuna", "Commune"),
    "col.year": ("Año", "Year"),
    "col.observed_value": ("Valor observado", "Observed"),
    "col.records_affected": ("Registros", "Records"),
    "col.consequence": ("Consecuencia", "Consequence"),
    "col.source": ("Fuente", "Source"),
    "col.source_file": ("Archivo", "File"),
    "col.source_line": ("Línea", "Line"),
    "col.area": ("Área", "Area"),
    "col.trend": ("Tendencia", "Trend"),
    "col.apc": ("PCA (APC) % (IC 95 %)", "APC % (95% CI)"),
    "col.quintile": ("Quintil", "Quintile"),
    "col.combo": ("Indicador · período", "Indicator · period"),
    "col.bym2": ("BYM2 /{unit}", "BYM2 /{unit}"),
    "col.cri": ("Intervalo de credibilidad", "Credible interval"),
    "col.bym2_prob": ("P(tasa > región)", "P(rate > region)"),
    "col.bym2_class": ("Clase de P", "P class"),
    "col.spatial_part": ("Vecinos", "Neighbours"),
    "col.cluster_type": ("Conglomerado (Moran local)", "Cluster (local Moran)"),
    "col.q_value": ("q (FDR)", "q (FDR)"),
    "col.n_communes": ("Comunas", "Communes"),
    "table.sort": ("clic para ordenar", "click to sort"),
    "table.show": ("Mostrar", "Show"),
    "table.all": ("todos los indicadores y períodos", "all indicators and periods"),
    "table.sort_hint": ("(clic en un encabezado para ordenar)", "(click a column header to sort)"),
    "table.columns": ("Columnas", "Columns"),
    "table.columns_hint": ("elija las columnas que se muestran", "choose the columns shown"),
    "audit.none": ("Ningún hallazgo de calidad de datos cambia cifras publicadas.",
                   "No data-quality finding changes any published number."),
    "audit.affects": ("<b>{n}</b> hallazgo(s) cambian cifras publicadas:", "<b>{n}</b> finding(s) change published numbers:"),
    "audit.no_others": ("Sin otros hallazgos.", "No other findings."),
    "audit.other_item": ("<code>{name}</code>: {n} hallazgo(s), {records} registro(s)",
                         "<code>{name}</code>: {n} finding(s), {records} record(s)"),
    "audit.others": ("Otros {n} hallazgo(s) quedan registrados en <code>marts.audit_data_quality</code> sin cambiar "
                     "ninguna cifra publicada:",
                     "{n} other finding(s) are recorded in <code>marts.audit_data_quality</code> that do not change "
                     "any published number:"),
    # Page: header, selector, headings, captions
    "page.title": ("Mortalidad infantil por comuna", "Infant mortality by commune"),
    "header.scope": ("{scope}, {period}. Indicadores: {inds}.", "{scope}, {period}. Indicators: {inds}."),
    "header.counts": ("Conteos: {basis}.", "Counts: {basis}."),
    "header.no_basis": ("base de los conteos no registrada", "count basis not recorded"),
    "header.generated": ("Generado el {when} desde <code>{file}</code> (esquema <code>marts</code>).",
                         "Generated {when} from <code>{file}</code> (schema <code>marts</code>)."),
    "header.built": (" Almacén de datos construido el {when}", " Warehouse built {when}"),
    "header.commit": (" desde el commit <code>{commit}</code>", " from commit <code>{commit}</code>"),
    "picker.label": ("Región:", "Region:"),
    "picker.jump": ("ir a la región", "to the region"),
    "country.heading": ("{name}: el país ({n} regiones)", "{name}: the country ({n} regions)"),
    "country.trends": ("Tendencias del país y sus regiones ({method})", "Trends of the country and its regions ({method})"),
    "country.trends.area": ("primero el país, luego las regiones", "the country first, then the regions"),
    "country.inequity": ("Desigualdad (el país)", "Inequity (the country)"),
    "region.heading": ("{name} ({n} comunas)", "{name} ({n} communes)"),
    "region.menu_note": (" El menú sobre la figura cambia el indicador y el período.",
                         " The menu above the figure switches indicator and period."),
    "region.no_rate": ("Sin tasa acumulada, por lo que no aparecen en las figuras (sin nacidos vivos, o sin tasa en "
                       "un año del período; ver Calidad de los datos): {items}.",
                       "No pooled rate, so not in the figures (no live births, or no rate in a year of the period; "
                       "see Data quality): {items}."),
    "region.trends.area": ("primero la región, luego las comunas en orden alfabético",
                           "the region first, then the communes alphabetically"),
    "region.inequity": ("5. Desigualdad", "5. Inequity"),
    "headline.region": ("región", "region"),
    "headline.country": ("país", "country"),
    "headline.rate": ("{label} <b>{rate}</b> por {unit} nacidos vivos ({ci}; {deaths} defunciones, {births} nacidos "
                      "vivos)",
                      "{label} <b>{rate}</b> per {unit} live births ({ci}; {deaths} deaths, {births} live births)"),
    "headline.no_rate": ("{label}: sin tasa acumulada (un año sin tasa; ver Calidad de los datos)",
                         "{label}: no pooled rate (a year without a rate; see Data quality)"),
    "headline.trend": ("tendencia {period}: <b>{cls}</b>, {apc} por año", "trend {period}: <b>{cls}</b>, {apc} per year"),
    "headline.trend_none": ("tendencia {period}: <b>{cls}</b>", "trend {period}: <b>{cls}</b>"),
    "headline.no_trend": ("tendencia: ninguna en <code>marts.fct_trends</code>", "trend: none in <code>marts.fct_trends</code>"),
    "headline.counts": ("<b>{n_hi}</b> de {n} comunas significativamente <span class='higher'>▲ mayores</span> y "
                        "<b>{n_lo}</b> significativamente <span class='lower'>▼ menores</span> que el resto de la región.",
                        "<b>{n_hi}</b> of {n} communes significantly <span class='higher'>▲ higher</span> and "
                        "<b>{n_lo}</b> significantly <span class='lower'>▼ lower</span> than the rest of the region."),
    "headline.counts_country": ("<b>{n_hi}</b> de {n} comunas significativamente <span class='higher'>▲ mayores</span> y "
                                "<b>{n_lo}</b> significativamente <span class='lower'>▼ menores</span> que el resto de su "
                                "región.",
                                "<b>{n_hi}</b> of {n} communes significantly <span class='higher'>▲ higher</span> and "
                                "<b>{n_lo}</b> significantly <span class='lower'>▼ lower</span> than the rest of their "
                                "region."),
    "ranking.heading": ("1. Ranking de comunas (tasas acumuladas)", "1. Ranking of communes (pooled rates)"),
    "ranking.caption": (
        "La tasa acumulada de cada comuna en el período (defunciones / nacidos vivos × {unit}) con su intervalo exacto "
        "de Poisson del 95 %, de la más alta (arriba) a la más baja; la línea vertical discontinua es la tasa "
        "acumulada de la región y la banda gris su IC 95 % (<code>marts.fct_area_period_rates</code>). ▲ (naranja): "
        "significativamente mayor, ▼ (azul): significativamente menor que el resto de la región (p medio &lt; "
        "{alpha}); ● (gris): sin diferencia significativa. Marcadores vacíos: menos de {n} defunciones (poco "
        "confiable). Pase el cursor para ver RT, RAP y RAP%. Por defecto: {default}.{menu} Fuente: "
        "<code>marts.fct_commune_vs_region</code>; conteos: {basis}.",
        "Each commune's pooled rate over the period (deaths / live births × {unit}) with its exact Poisson 95% "
        "confidence interval, sorted from highest (top) to lowest; the dashed vertical line is the region's pooled "
        "rate, the grey band its 95% CI (<code>marts.fct_area_period_rates</code>). ▲ (orange): significantly higher, "
        "▼ (blue): significantly lower than the rest of the region (mid-p &lt; {alpha}); ● (grey): no significant "
        "difference. Open markers: fewer than {n} deaths (unreliable). Hover for RT, RAP and RAP%. Default: "
        "{default}.{menu} Source: <code>marts.fct_commune_vs_region</code>; counts: {basis}."),
    "trends.heading": ("2. Tendencias por comuna ({method})", "2. Trends by commune ({method})"),
    "trends.caption": (
        "{ind}: tasas anuales por {unit} nacidos vivos (puntos) con su IC exacto de Poisson del 95 % (bigotes), "
        "{area}; la línea es la tendencia {window} de {method} de <code>marts.fct_trends</code>, log10(tasa) = "
        "intercept_log10 + slope_log10 × año (continua naranja: creciente; discontinua azul: decreciente; punteada "
        "gris: estacionaria), con su clase y su PCA (porcentaje de cambio anual, APC) escritos en cada título. Los "
        "años con tasa cero quedan fuera del ajuste logarítmico; los años sin tasa no se dibujan. Cada panel tiene su "
        "propia escala vertical. Fuente: <code>marts.fct_area_year_rates</code> y <code>marts.fct_trends</code>; "
        "conteos: {basis}.",
        "{ind}: yearly rates per {unit} live births (points) with exact Poisson 95% CIs (whiskers), {area}; the line is "
        "the {method} trend {window} of <code>marts.fct_trends</code>, log10(rate) = intercept_log10 + slope_log10 × "
        "year (solid orange: increasing; dashed blue: decreasing; dotted grey: stationary), with its class and APC "
        "(annual percent change) written in each title. Years with a zero rate are left out of the log-scale fit; "
        "unavailable years are not plotted. Each panel has its own vertical scale. Source: "
        "<code>marts.fct_area_year_rates</code> and <code>marts.fct_trends</code>; counts: {basis}."),
    "funnel.heading": ("3. Gráfico de embudo", "3. Funnel plot"),
    "screening.heading": ("Cribado: peor y empeorando primero", "Screening: worse and worsening first"),
    "screening.caption": ("Cada comuna según su comparación con el resto de la región y su tendencia ({method}), "
                          "{combo} (<code>marts.fct_commune_screening</code>); las categorías que piden atención "
                          "primero.",
                          "Each commune by its comparison with the rest of the region and its trend ({method}), "
                          "{combo} (<code>marts.fct_commune_screening</code>); the categories that call for "
                          "attention first."),
    "screening.worse_and_worsening": ("Peor y empeorando", "Worse and worsening"),
    "screening.worse": ("Peor, sin empeorar", "Worse, not worsening"),
    "screening.worsening": ("Empeorando, sin ser peor", "Worsening, not worse"),
    "screening.similar_no_trend": ("Similar y sin tendencia", "Similar, no trend"),
    "screening.improving": ("Mejorando", "Improving"),
    "screening.better": ("Mejor", "Better"),
    "screening.better_and_improving": ("Mejor y mejorando", "Better and improving"),
    "screening.not_classifiable": ("Sin clasificar (tendencia sin clase)", "Not classifiable (trend without a class)"),
    "funnel.caption": (
        "La tasa acumulada de cada comuna frente a su número de nacidos vivos (escala logarítmica). Los embudos son "
        "los límites de control exactos de Poisson alrededor de la tasa acumulada de la región (línea continua) para "
        "una comuna de ese tamaño: 95 % (discontinua) y 99,8 % (punteada). Una comuna fuera del embudo se aparta de la "
        "región más de lo que explica el azar a ese nivel; las comunas pequeñas necesitan desvíos grandes. Forma y "
        "color: <code>funnel_category</code> de <code>marts.fct_commune_vs_region</code> (▲ sobre, ▼ bajo los "
        "límites; relleno: más allá del 99,8 %; el menú ofrece también los límites ajustados por la sobredispersión de la "
        "región y la categoría ajustada de cada comuna, <code>funnel_category_adjusted</code>; la comuna frente a toda la región, por lo que puede diferir de la "
        "prueba frente al resto de la región del ranking). Se nombran las comunas fuera de los límites del 95 % "
        "mientras los nombres no se superpongan; pase el cursor o toque un punto para ver el resto. Por defecto: "
        "{default}.{menu}",
        "Each commune's pooled rate against its number of live births (log scale). The funnels are the exact "
        "Poisson control limits around the region's pooled rate (solid line) for a commune of that size: 95% "
        "(dashed) and 99.8% (dotted). A commune outside the funnel differs from the region more than chance alone "
        "would explain at that level; small communes need large deviations. Shape and colour: "
        "<code>funnel_category</code> of <code>marts.fct_commune_vs_region</code> (▲ above, ▼ below the limits; "
        "filled: beyond 99.8%; the menu also offers the limits adjusted for the region's over-dispersion and each "
        "commune's adjusted category, <code>funnel_category_adjusted</code>; the commune against the whole region, so it can differ from the test against the "
        "rest of the region in the ranking). Communes outside the 95% limits are named where the names do not "
        "overlap; hover or tap a point for the others. Default: {default}.{menu}"),
    "map.heading": ("4. Mapa", "4. Map"),
    "map.caption": (
        "Las comunas en sus límites (IDE Chile, División Político-Administrativa 2023, simplificados para la "
        "visualización; sin mapa de fondo: el informe funciona sin conexión), coloreadas por la medida elegida en el "
        "menú: la tasa bruta acumulada de <code>marts.fct_commune_vs_region</code>; la tasa suavizada por Bayes "
        "empírico de <code>marts.fct_smoothed_rates</code> (la tasa bruta acercada a la regional, tanto más cuanto "
        "menos nacimientos: la tasa extrema de una comuna pequeña es sobre todo ruido); la tasa suavizada por el "
        "modelo BYM2 de <code>marts.fct_bym2_rates</code> (media a posteriori, que toma fuerza de los vecinos y del "
        "país; su intervalo de credibilidad del 95 % al pasar el cursor; una comuna sin vecinos, con un rombo y trama cruzada, "
        "tiene solo el componente no estructurado); la RT (azul bajo 1, rojo sobre 1, escala logarítmica); la "
        "probabilidad de que la tasa verdadera de la comuna supere la de su región (<code>prob_exceeds_region</code>), "
        "y la misma según BYM2 en cinco clases (de azul, por debajo, a rojo, por encima; paleta apta para "
        "daltónicos); los conglomerados de Moran local de <code>marts.fct_spatial_clusters</code> (alto-alto, "
        "bajo-bajo, alto-bajo o bajo-alto cuando q ≤ {fdr} tras la corrección de Benjamini-Hochberg; color y trama); "
        "o la clase de tendencia (con tramas). Las tres escalas de tasas son iguales, del percentil 10 al 90 de las "
        "tasas de la región (fuera de ellos el color se satura). Un contorno negro grueso marca las comunas "
        "significativas: p medio &lt; {alpha} frente al resto de la región (tasa bruta y suavizada por Bayes "
        "empírico, RT), una probabilidad de superar mayor que {cut} (BYM2 y sus clases, Bayes empírico) o un "
        "conglomerado. Se nombran las comunas mientras los nombres no se superpongan; pase el cursor o toque una "
        "comuna para ver sus cifras.",
        "The communes on their boundaries (IDE Chile, División Político-Administrativa 2023, simplified for display; "
        "no background map: the report works offline), coloured by the measure chosen in the menu: the crude pooled "
        "rate of <code>marts.fct_commune_vs_region</code>; the empirical Bayes smoothed rate of "
        "<code>marts.fct_smoothed_rates</code> (the crude rate pulled towards the region's, the more so the fewer "
        "the births: a small commune's extreme crude rate is mostly noise); the rate smoothed by the BYM2 model of "
        "<code>marts.fct_bym2_rates</code> (the posterior mean, borrowing strength from the neighbours and the "
        "country; its 95% credible interval on hover; a commune without neighbours, marked by a diamond and "
        "cross-hatched, has the "
        "unstructured part only); RT (blue below 1, red above, log scale); the probability that the commune's true "
        "rate exceeds its region's (<code>prob_exceeds_region</code>), and the same by BYM2 in five classes (blue "
        "below, red above; a colour-blind-safe palette); the local Moran clusters of "
        "<code>marts.fct_spatial_clusters</code> (high-high, low-low, high-low or low-high where q ≤ {fdr} after "
        "the Benjamini-Hochberg correction; colour and hatching); or the trend class (hatched). The three rate "
        "scales are the same, from the 10th to the 90th percentile of the region's rates (beyond them the colour "
        "saturates). A thick black outline marks the significant communes: mid-p &lt; {alpha} against the rest of "
        "the region (crude and EB smoothed rates, RT), a probability of exceeding above {cut} (BYM2 and its classes, "
        "EB) or a cluster. Communes are named where the names do not overlap; hover or tap a commune for its "
        "numbers."),
    "map.not_on_map": (" Fuera del mapa (sin polígono, o lejos del continente, como una isla): {names}.",
                       " Not on the map (no polygon, or far off the mainland such as an island): {names}."),
    "map.outlined": ("Qué comunas tienen contorno (significativas)", "Which communes are outlined (significant)"),
    "inequity.caption": (
        "¿Sigue la mortalidad infantil a la pobreza? Las comunas se ordenan de la más a la menos privada según el "
        "estratificador (valor mayor = más privada) y se agrupan en quintiles de nacidos vivos (q1 el más privado, "
        "q5 el menos, la referencia). Izquierda: la tasa acumulada de cada quintil con su IC exacto del 95 % "
        "(<code>marts.fct_rates_by_quintile</code>). Centro: la tasa acumulada de cada comuna frente a su privación, "
        "con la tasa ajustada por la regresión de Poisson sobre el rango de la comuna, la que da el SII y el RII "
        "(<code>marts.fct_commune_deprivation</code>). Derecha: el RII de cada año con su IC 95 % y su tendencia de "
        "{method} (<code>marts.fct_inequality</code>, <code>marts.fct_inequality_trends</code>): ¿la brecha se amplía, "
        "se reduce o se mantiene? Definiciones: <code>docs/methods/inequity.md</code>. El menú cambia el indicador y el "
        "estratificador.",
        "Does infant mortality follow poverty? Communes are ordered from most to least deprived by the stratifier "
        "(higher value = more deprived) and grouped into quintiles of live births (q1 most deprived, q5 least, the "
        "reference). Left: the pooled rate of each quintile with its exact 95% CI "
        "(<code>marts.fct_rates_by_quintile</code>). Middle: each commune's pooled rate against its deprivation, "
        "with the rate fitted by the Poisson regression on the commune's rank behind the SII and RII "
        "(<code>marts.fct_commune_deprivation</code>). Right: the RII of each single year with its 95% CI and its "
        "{method} trend (<code>marts.fct_inequality</code>, <code>marts.fct_inequality_trends</code>): is the gap "
        "widening, narrowing or holding? Definitions: <code>docs/methods/inequity.md</code>. The menu switches indicator and "
        "stratifier."),
    "table.heading": ("6. Tabla: cada comuna frente a la región", "6. Table: every commune against the region"),
    "table.caption": (
        "Todas las filas de <code>marts.fct_commune_vs_region</code> de la región. RT, RAP, RAP% y las defunciones "
        "en exceso comparan la comuna con toda la región; <i>RT frente al resto</i>, el p medio y <i>frente al "
        "resto</i> la comparan con el resto de la región (la región sin la comuna). El lugar 1 es la tasa más alta. "
        "«Columnas» muestra las demás columnas.",
        "All rows of <code>marts.fct_commune_vs_region</code> for the region. RT, RAP, RAP% and excess deaths compare "
        "the commune with the whole region; <i>RR vs rest</i>, the mid-p value and <i>vs rest</i> compare it with "
        "the rest of the region (the region minus the commune). Rank 1 is the highest rate. \"Columns\" shows the "
        "other columns."),
    "definitions.heading": ("Definiciones", "Definitions"),
    "quality.heading": ("Calidad de los datos", "Data quality"),
    "quality.caption": (
        "Hallazgos de <code>marts.audit_data_quality</code> (su texto es el del mart, en inglés). Los listados cambian "
        "cifras publicadas (p. ej., una comuna-año cuya tasa no está disponible y queda fuera de las comparaciones "
        "acumuladas y de los ajustes de tendencia); el resto se registra solo por transparencia.",
        "Findings of <code>marts.audit_data_quality</code>. Those listed change published numbers (e.g. a "
        "commune-year whose rate is unavailable and is left out of pooled comparisons and trend fits); the rest are "
        "recorded for transparency only."),
    "footer": ("Informe generado por <code>python -m infant_mortality.report</code> (<code>--lang en</code>: en "
               "inglés). Todos los datos y plotly.js están incluidos en este archivo; no necesita conexión a internet. "
               "Métodos: <code>docs/methods/README.md</code>.",
               "Report generated by <code>python -m infant_mortality.report --lang en</code> (Spanish by default). "
               "All data and plotly.js are embedded in this file; it needs no internet connection. Methods: "
               "<code>docs/methods/README.md</code>."),
    # Definitions
    "glossary.indicator": ("defunciones a la edad de {ages} en el año, por {unit} nacidos vivos del año (comuna de "
                           "residencia de la madre)",
                           "deaths at ages {ages} in the year, per {unit} live births of the year (mother's commune of "
                           "residence)"),
    "glossary.absent": ("; no está en este almacén de datos", "; not in this warehouse"),
    "glossary.pooled": ("Tasa acumulada", "Pooled rate"),
    "glossary.pooled.text": ("suma de defunciones / suma de nacidos vivos en los años del período, por {unit} (nunca "
                             "un promedio de tasas anuales); IC 95 %: límites exactos de Poisson (Garwood).",
                             "sum of deaths / sum of live births over the period's years, times {unit} (never an "
                             "average of yearly rates); 95% CI: exact Poisson (Garwood) limits."),
    "glossary.rt": ("RT, razón de tasas", "RT, rate ratio (razón de tasas)"),
    "glossary.rt.text": ("tasa de la comuna / tasa de la región (la región incluye la comuna).",
                         "commune rate / region rate (the region includes the commune)."),
    "glossary.rap": ("RAP, riesgo atribuible poblacional", "RAP, excess rate (riesgo atribuible poblacional)"),
    "glossary.rap.text": ("tasa de la comuna − tasa de la región, por {unit} nacidos vivos.",
                          "commune rate − region rate, per {unit} live births."),
    "glossary.rap_pct": ("RAP%, riesgo atribuible porcentual", "RAP%, attributable percent"),
    "glossary.rap_pct.text": ("100 (tasa de la comuna − tasa de la región) / tasa de la comuna = 100 (RT − 1) / RT.",
                              "100 (commune rate − region rate) / commune rate = 100 (RT − 1) / RT."),
    "glossary.significant": ("Significativamente mayor / menor", "Significantly higher / lower"),
    "glossary.significant.text": ("p medio bilateral < {alpha} de la prueba condicional exacta de la comuna frente "
                                  "al resto de la región (la región sin la comuna).",
                                  "two-sided mid-p < {alpha} of the exact conditional test of the commune against "
                                  "the rest of the region (the region minus the commune)."),
    "glossary.unreliable": ("Poco confiable", "Unreliable"),
    "glossary.unreliable.text": ("menos de {n} defunciones (convención de CDC/NCHS): la tasa se muestra, pero debe "
                                 "leerse con cautela.",
                                 "fewer than {n} deaths (CDC/NCHS convention): the rate is shown, but read it with "
                                 "care."),
    "glossary.trend": ("Tendencia, PCA (porcentaje de cambio anual, APC)", "Trend, APC (annual percent change)"),
    "glossary.trend.text": ("regresión de {method} de log10(tasa) sobre el año con errores AR(1); PCA = (10^pendiente "
                            "− 1) × 100; creciente / decreciente cuando p < {p}, si no estacionaria.",
                            "{method} regression of log10(rate) on year with AR(1) errors; APC = (10^slope − 1) × 100; "
                            "increasing / decreasing when p < {p}, else stationary."),
    # Text alternatives of the figures (findings.py)
    "finding.label": ("En síntesis:", "In short:"),
    "finding.none": ("ninguna", "none"),
    "finding.no_rate": ("sin tasa acumulada", "no pooled rate"),
    "finding.rate": ("{rate} por {unit} nacidos vivos ({ci})", "{rate} per {unit} live births ({ci})"),
    "finding.ranking": ("{combo}, {region}: tasa regional {rate}. Tasas más altas: {top}. {n_hi} de {n} comunas "
                        "significativamente mayores y {n_lo} menores que el resto de la región.",
                        "{combo}, {region}: regional rate {rate}. Highest rates: {top}. {n_hi} of {n} communes "
                        "significantly higher and {n_lo} lower than the rest of the region."),
    "finding.trend": ("{area}, {ind} {period}: tendencia {cls}, {apc}.", "{area}, {ind} {period}: {cls} trend, {apc}."),
    "finding.trend_none": ("{area}, {ind}: sin tendencia en el mart.", "{area}, {ind}: no trend in the mart."),
    "finding.trend_members": ("Sus {members} por clase: {classes}.", "Its {members} by class: {classes}."),
    "finding.members.communes": ("comunas", "communes"),
    "finding.members.regions": ("regiones", "regions"),
    "finding.funnel": ("{combo}, {region}: tasa regional {rate}. Sobre el límite de 99,8 %: {above_998}; sobre el de "
                       "95 %: {above_95}; bajo el de 95 %: {below_95}; bajo el de 99,8 %: {below_998}.",
                       "{combo}, {region}: regional rate {rate}. Above the 99.8% limit: {above_998}; above the 95% "
                       "limit: {above_95}; below the 95% limit: {below_95}; below the 99.8% limit: {below_998}."),
    "finding.map": ("{combo}, {region}: tasas brutas más altas en {top}; con contorno (significativamente distintas "
                    "del resto de la región): {outlined}.",
                    "{combo}, {region}: highest crude rates in {top}; outlined (significantly different from the rest "
                    "of the region): {outlined}."),
    "finding.map_exceeding": ("Probabilidad de superar la tasa regional mayor que {cut}: {names}.",
                              "Probability of exceeding the regional rate above {cut}: {names}."),
    "finding.map_bym2": ("BYM2 ({combo}): tasas más altas {top}; P(tasa > región) mayor que {cut}: {names}.",
                         "BYM2 ({combo}): highest rates {top}; P(rate > region) above {cut}: {names}."),
    "finding.map_islands": ("Sin vecinos (solo componente no estructurado: su estimación se acerca al nivel del país, "
                            "no al de sus vecinos): {names}.",
                            "No neighbours (unstructured part only: their estimates borrow from the whole country, "
                            "not from neighbours): {names}."),
    "finding.map_clusters": ("Conglomerados de Moran local con q ≤ {alpha}: {clusters} ({n} comunas no significativas).",
                             "Local Moran clusters at q ≤ {alpha}: {clusters} ({n} communes not significant)."),
    "finding.map_no_neighbours": ("Sin vecinos, sin I local: {names}.", "No neighbours, no local I: {names}."),
    "finding.inequity": ("{area}, {ind} según {strat}: {measures}; la brecha anual {gap}.",
                         "{area}, {ind} by {strat}: {measures}; the yearly gap {gap}."),
    "finding.table_note": ("Datos: <a href=\"#{table}\">la tabla 6</a>.", "Data: <a href=\"#{table}\">table 6</a>."),
    "data.bym2": ("Datos de los mapas BYM2 y de conglomerados: cada comuna, indicador y período",
                  "Data of the BYM2 and cluster maps: every commune, indicator and period"),
    "map.clusters.summary": ("Conglomerados de cada indicador y período, en texto",
                             "Clusters of each indicator and period, in words"),
    "data.trends": ("Datos de la figura: {ind} por año y tendencia", "Figure data: {ind} by year and trend"),
    "data.inequity": ("Datos de la figura: {ind} por quintil de {strat}", "Figure data: {ind} by quintile of {strat}"),
    # The country against UN IGME (benchmarks.py)
    "bench.heading": ("Comparación con UN IGME", "Comparison with UN IGME"),
    "bench.caption": ("La {ind} anual del país en este almacén de datos (con su IC exacto del 95 %) junto a la estimación "
                      "del Grupo Interinstitucional de las Naciones Unidas para la Estimación de la Mortalidad en la "
                      "Niñez (UN IGME, ronda 2020) y la banda de 90 % de su ronda 2015 "
                      "(<code>marts.fct_external_benchmarks</code>); «dentro de la tolerancia»: las defunciones difieren "
                      "de las de UN IGME menos que la tolerancia del build.",
                      "The country's yearly {ind} in this warehouse (with its exact 95% CI) beside the estimate of the "
                      "UN Inter-agency Group for Child Mortality Estimation (UN IGME, 2020 round) and the 90% band of "
                      "its 2015 round (<code>marts.fct_external_benchmarks</code>); \"within tolerance\": the deaths "
                      "differ from UN IGME's by less than the build's tolerance."),
    "bench.title": ("{ind}: el país y UN IGME", "{ind}: the country and UN IGME"),
    "bench.trace.country": ("{ind} del país (IC 95 %)", "Country {ind} (95% CI)"),
    "bench.trace.igme": ("UN IGME, ronda 2020", "UN IGME, 2020 round"),
    "bench.trace.band": ("UN IGME, ronda 2015: banda de 90 %", "UN IGME, 2015 round: 90% band"),
    "bench.col.country": ("País /{unit} (IC 95 %)", "Country /{unit} (95% CI)"),
    "bench.col.igme": ("UN IGME /{unit}", "UN IGME /{unit}"),
    "bench.col.band": ("UN IGME 2015, banda 90 %", "UN IGME 2015, 90% band"),
    "bench.col.rate_difference": ("Diferencia /{unit}", "Difference /{unit}"),
    "bench.col.deaths_difference": ("Diferencia de defunciones", "Deaths difference"),
    "bench.col.deaths_difference_percent": ("Diferencia de defunciones %", "Deaths difference %"),
    "bench.col.within": ("Dentro de la tolerancia", "Within tolerance"),
    "bench.data": ("Tabla: el país y UN IGME por año", "Table: the country and UN IGME by year"),
    "bench.finding": ("{first}-{last}: la tasa del país difiere de la de UN IGME entre {lo} y {hi} por {unit}; años "
                      "con defunciones fuera de la tolerancia ({n}): {years}.",
                      "{first}-{last}: the country's rate differs from UN IGME's by {lo} to {hi} per {unit}; years "
                      "with deaths outside the tolerance ({n}): {years}."),
    "bench.unavailable": ("Sin comparación con UN IGME en este almacén de datos ({reasons}).",
                          "No comparison with UN IGME in this warehouse ({reasons})."),
    "no": ("no", "no"),
    # The study, reproduced (study.py: marts.fct_study_findings)
    "study.heading": ("El estudio, reproducido", "The study, reproduced"),
    "study.caption": ("Cada resultado del resumen de González, Alfaro y Horna-Campos (Rev Chil Pediatr "
                      "2020;91(1):34-44; las 52 comunas de la Región Metropolitana, {start}-{end}) junto al valor que "
                      "calcula este almacén de datos para la misma medida (<code>marts.fct_study_findings</code>): "
                      "tasas por {unit} nacidos vivos y razón de tasas (RT) respecto de la región con su IC exacto del "
                      "95 %, y tendencias por Prais-Winsten con la regla del estudio (p &lt; {p}). Sin el período del "
                      "estudio en los datos se usa el período más largo calculado dentro de él, y se nombran los años "
                      "que faltan y por qué: nada se extrapola. El veredicto es sobre los datos de este almacén (ver "
                      "«Conteos» en la cabecera).",
                      "Each result of the abstract of González, Alfaro & Horna-Campos (Rev Chil Pediatr "
                      "2020;91(1):34-44; the 52 communes of the Metropolitan Region, {start}-{end}) beside the value "
                      "this warehouse computes for the same measure (<code>marts.fct_study_findings</code>): rates per "
                      "{unit} live births and rate ratios (RT) to the region with their exact 95% CI, and trends by "
                      "Prais-Winsten with the study's rule (p &lt; {p}). Without the study's period in the data, the "
                      "longest period computed inside it is used, and the years missing are named with why: nothing "
                      "is extrapolated. The verdict is about this warehouse's data (see \"Counts\" in the header)."),
    "study.table": ("Tabla: los resultados del estudio y los de este almacén de datos",
                    "Table: the study's results and this warehouse's"),
    "study.summary": ("De {n} resultados, {holds} se cumplen, {does_not_hold} no se cumplen y {not_computable} no se "
                      "pueden calcular con estos datos.",
                      "Of {n} results, {holds} hold, {does_not_hold} do not hold and {not_computable} cannot be "
                      "computed from these data."),
    "study.none": ("Este almacén de datos no tiene resultados del estudio.", "This warehouse has no results of the study."),
    "study.col.statement": ("Resultado del estudio", "The study's result"),
    "study.col.study_value": ("Valor del estudio", "Study's value"),
    "study.col.warehouse_value": ("Valor de este almacén", "This warehouse's value"),
    "study.col.period": ("Período calculado", "Period computed"),
    "study.col.verdict": ("¿Se cumple?", "Does it hold?"),
    "study.no_value": ("sin cifra", "no figure"),
    "study.rate": ("{rate} por {unit}", "{rate} per {unit}"),
    "study.rt": ("RT {value}", "RT {value}"),
    "study.value.rate": ("{commune}: {rate} por {unit} ({ci}), puesto {rank} de {n}",
                         "{commune}: {rate} per {unit} ({ci}), rank {rank} of {n}"),
    "study.value.highest_rate": ("la más alta es {name}", "the highest is {name}"),
    "study.value.lowest_rate": ("la más baja es {name}", "the lowest is {name}"),
    "study.value.rate_ratio": ("RT {value} ({ci})", "RT {value} ({ci})"),
    "study.value.trend": ("{direction}, {apc}, p = {p}", "{direction}, {apc}, p = {p}"),
    "study.period.study": ("{period}, el del estudio", "{period}, the study's"),
    "study.period.overlap": ("{period}; faltan {reasons}", "{period}; missing {reasons}"),
    "study.period.none": ("ninguno; faltan {reasons}", "none; missing {reasons}"),
    "study.holds": ("✓ Se cumple", "✓ Holds"),
    "study.does_not_hold": ("✗ No se cumple", "✗ Does not hold"),
    "study.not_computable": ("– No calculable: {reason}", "– Not computable: {reason}"),
    "study.reason.deaths_not_in_input": ("sin defunciones en los datos de entrada", "no deaths in the input"),
    "study.reason.births_not_in_input": ("sin nacimientos en los datos de entrada", "no births in the input"),
    "study.reason.indicator_not_in_build": ("los datos de entrada no tienen este indicador",
                                            "the input has no count of this indicator"),
    "study.reason.region_not_in_build": ("la región 13 no está en este almacén", "region 13 is not in this warehouse"),
    "study.reason.period_not_in_build": ("ningún período calculado los cubre (var custom_period)",
                                         "no computed period covers them (var custom_period)"),
    "study.reason.commune_rate_unavailable": ("la comuna no tiene tasa en el período",
                                              "the commune has no rate over the period"),
    "study.reason.trend_not_estimable": ("tendencia de Prais-Winsten no estimable", "Prais-Winsten trend not estimable"),
    # Messages of report.js
    "js.scroll_hint": ("Desplace el cuadro para ver más filas o columnas →", "Scroll the box for more rows or columns →"),
    "js.unknown_region": ("La región «{code}» de la dirección no existe en este informe; se muestra {shown}.",
                          "The region “{code}” in the address is not in this report; showing {shown}."),
    "js.modebar.Download plot as a png": ("Descargar el gráfico como PNG", "Download plot as a png"),
    "js.modebar.Zoom in": ("Acercar", "Zoom in"),
    "js.modebar.Zoom out": ("Alejar", "Zoom out"),
    "js.modebar.Autoscale": ("Escala automática", "Autoscale"),
    "js.modebar.Reset axes": ("Restablecer ejes", "Reset axes"),
    "js.modebar.Pan": ("Desplazar", "Pan"),
    "js.modebar.Zoom": ("Zoom", "Zoom"),
    "js.modebar.Box Select": ("Selección rectangular", "Box Select"),
    "js.modebar.Lasso Select": ("Selección con lazo", "Lasso Select"),
    "js.modebar.Toggle Spike Lines": ("Mostrar u ocultar líneas guía", "Toggle Spike Lines"),
    "js.modebar.Show closest data on hover": ("Mostrar el dato más cercano", "Show closest data on hover"),
    "js.modebar.Compare data on hover": ("Comparar datos", "Compare data on hover"),
    "js.modebar.Double-click to zoom back out": ("Doble clic para volver a la vista completa",
                                                  "Double-click to zoom back out"),
    "js.modebar.Produced with Plotly.js": ("Hecho con Plotly.js", "Produced with Plotly.js"),
}
