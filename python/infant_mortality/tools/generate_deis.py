"""Generate DEIS-layout death and birth microdata, calibrated to the bundled real counts.

The files have exactly the published layouts (docs/using/deis-layouts.md), so the staging models can
be tested and benchmarked without the real files, which cannot be redistributed here.

SYNTHETIC DATA. Only commune-year totals are calibrated to real data; every field of every
generated row (dates, sex, ages, causes, birth weights...) is drawn at random (causes: a
plausible mix by age at death, ICD-9 before 1997, a few blank or unusable codes; CAUSES, ICD9):

- Región Metropolitana (13), 2010-2019: live births equal the INE births by commune and year
  (data/raw/ine_vital_statistics_chile_2010_2019.csv, RM rows) and infant deaths equal INE deaths of all
  ages minus DEIS deaths aged 1+ (data/raw/deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv).
  Where that derived count is negative (Providencia 13123 in 2018: -2) the generator writes 0
  infant deaths and logs it (manifest `notes`).
- Deaths aged 1+: the real DEIS counts by commune, year and sex for 1990-2019 (all communes, and
  the unknown commune 99999 when the scope is national); outside those years, extrapolated from
  the nearest five real years (+2% a year after 2019, -1% a year before 1990), Poisson-drawn.
- Elsewhere, births are Poisson around the INE population aged 0 (2002-2035; +2% a year further
  back before 2002, -1% a year after 2035) times a commune factor in [0.95, 1.05] (RM 2010-2019
  births are 0.96 times the population aged 0 on average), and infant deaths are Poisson around
  an infant mortality rate of 6.5 + 9.5 exp(-(year - 1990) / 6) per 1000 (16 in 1990, 6.8 in
  2010) times a commune factor.
- `scale` multiplies every count (calibrated counts are rounded, so equality holds at scale 1).

Vectorised with numpy; DuckDB writes the CSVs. Deterministic: the same arguments give the same
bytes.
"""

from __future__ import annotations

import argparse
import codecs
import json
import logging
import os
import sys
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from infant_mortality.dbt_plugins.deis_files import (BIRTHS_COLUMNS, BIRTHS_PER_YEAR_COLUMNS, DEATHS_COLUMNS,
                                         GENERATED_PREFIX)

log = logging.getLogger("imr-generate-deis")

SYNTHETIC_NOTICE = ("Ages, causes of death and all other fields of generated rows are synthetic; only "
                    "commune-year totals are calibrated to the real data. Causes (DIAG1/DIAG2) are a "
                    "plausible mix by age at death (perinatal and congenital causes dominate neonatal "
                    "deaths; respiratory, infectious, external and ill-defined causes are more frequent "
                    "after 28 days), in ICD-9 before 1997 and ICD-10 from 1997, with 0.4% blank and 0.2% "
                    "unusable codes.")

CALIBRATED_REGION = "13"
CALIBRATED_YEARS = range(2010, 2020)
DEIS_YEARS = range(1990, 2020)
POPULATION_YEARS = range(2002, 2036)
UNKNOWN_COMMUNE = (99999, "Ignorada", "Ignorada")

DEATHS_ALTERNATIVE_NAMES = {"ANO_DEF": "AÑO", "GLOSA_SEXO": "SEXO_NOMBRE",
                            "CODIGO_COMUNA_RESIDENCIA": "COD_COMUNA",
                            "GLOSA_COMUNA_RESIDENCIA": "COMUNA", "GLOSA_REG_RES": "NOMBRE_REGION"}
BIRTHS_ALTERNATIVE_NAMES = {"ANO_NAC": "AÑO_NAC", "COMUNA": "COD_COMUNA",
                            "GLOSA_COMUNA": "NOMBRE_COMUNA", "REGION": "COD_REGION"}

# ICD-10 entries: code, chapter code and gloss, group code and gloss, category code and gloss,
# subcategory gloss (the subcategory code is the code).
_CH_PERINATAL = ("P00-P96", "Capítulo XVI: Ciertas afecciones originadas en el período perinatal")
_CH_CONGENITAL = ("Q00-Q99", "Capítulo XVII: Malformaciones congénitas, deformidades y anomalías "
                             "cromosómicas")
_CH_SYMPTOMS = ("R00-R99", "Capítulo XVIII: Síntomas, signos y hallazgos anormales clínicos y de "
                           "laboratorio, no clasificados en otra parte")
_CH_RESPIRATORY = ("J00-J99", "Capítulo X: Enfermedades del sistema respiratorio")
_CH_CIRCULATORY = ("I00-I99", "Capítulo IX: Enfermedades del sistema circulatorio")
_CH_NEOPLASMS = ("C00-D48", "Capítulo II: Tumores [neoplasias]")
_CH_INJURY = ("S00-T98", "Capítulo XIX: Traumatismos, envenenamientos y algunas otras "
                         "consecuencias de causas externas")
_CH_EXTERNAL = ("V01-Y98", "Capítulo XX: Causas externas de morbilidad y de mortalidad")
_CH_INFECTIOUS = ("A00-B99", "Capítulo I: Ciertas enfermedades infecciosas y parasitarias")
_GR_GESTATION = ("P05-P08", "Trastornos relacionados con la duración de la gestación y el "
                            "crecimiento fetal")
_GR_PERINATAL_RESP = ("P20-P29", "Trastornos respiratorios y cardiovasculares específicos del "
                                 "período perinatal")
_CAT_P07 = ("P07", "Trastornos relacionados con duración corta de la gestación y con bajo peso "
                   "al nacer, no clasificados en otra parte")
_GR_HEART_MALF = ("Q20-Q28", "Malformaciones congénitas del sistema circulatorio")
_SUB_CARDIAC_MALF = "Malformación congénita del corazón, no especificada"

ICD10 = {
    "P073": (*_CH_PERINATAL, *_GR_GESTATION, *_CAT_P07, "Otros recién nacidos pretérmino"),
    "P072": (*_CH_PERINATAL, *_GR_GESTATION, *_CAT_P07, "Inmaturidad extrema"),
    "P220": (*_CH_PERINATAL, *_GR_PERINATAL_RESP, "P22", "Dificultad respiratoria del recién nacido",
             "Síndrome de dificultad respiratoria del recién nacido"),
    "P219": (*_CH_PERINATAL, *_GR_PERINATAL_RESP, "P21", "Asfixia del nacimiento",
             "Asfixia del nacimiento, no especificada"),
    "P369": (*_CH_PERINATAL, "P35-P39", "Infecciones específicas del período perinatal",
             "P36", "Sepsis bacteriana del recién nacido",
             "Sepsis bacteriana del recién nacido, no especificada"),
    "Q249": (*_CH_CONGENITAL, *_GR_HEART_MALF, "Q24", "Otras malformaciones congénitas del corazón",
             _SUB_CARDIAC_MALF),
    "Q897": (*_CH_CONGENITAL, "Q80-Q89", "Otras malformaciones congénitas", "Q89",
             "Otras malformaciones congénitas, no clasificadas en otra parte",
             "Malformaciones congénitas múltiples, no clasificadas en otra parte"),
    "Q913": (*_CH_CONGENITAL, "Q90-Q99", "Anomalías cromosómicas, no clasificadas en otra parte",
             "Q91", "Síndrome de Edwards y síndrome de Patau", "Síndrome de Edwards, no especificado"),
    "R95X": (*_CH_SYMPTOMS, "R95-R99", "Causas mal definidas y desconocidas de mortalidad", "R95",
             "Síndrome de la muerte súbita infantil", "Síndrome de la muerte súbita infantil"),
    "R99X": (*_CH_SYMPTOMS, "R95-R99", "Causas mal definidas y desconocidas de mortalidad", "R99",
             "Otras causas mal definidas y las no especificadas de mortalidad",
             "Otras causas mal definidas y las no especificadas de mortalidad"),
    "J189": (*_CH_RESPIRATORY, "J09-J18", "Influenza [gripe] y neumonía", "J18",
             "Neumonía, organismo no especificado", "Neumonía, no especificada"),
    "J449": (*_CH_RESPIRATORY, "J40-J47", "Enfermedades crónicas de las vías respiratorias inferiores",
             "J44", "Otras enfermedades pulmonares obstructivas crónicas",
             "Enfermedad pulmonar obstructiva crónica, no especificada"),
    "I219": (*_CH_CIRCULATORY, "I20-I25", "Enfermedades isquémicas del corazón", "I21",
             "Infarto agudo del miocardio", "Infarto agudo del miocardio, sin otra especificación"),
    "I64X": (*_CH_CIRCULATORY, "I60-I69", "Enfermedades cerebrovasculares", "I64",
             "Accidente vascular encefálico agudo, no especificado como hemorrágico o isquémico",
             "Accidente vascular encefálico agudo, no especificado como hemorrágico o isquémico"),
    "I10X": (*_CH_CIRCULATORY, "I10-I15", "Enfermedades hipertensivas", "I10",
             "Hipertensión esencial (primaria)", "Hipertensión esencial (primaria)"),
    "C349": (*_CH_NEOPLASMS, "C30-C39", "Tumores malignos de los órganos respiratorios e intratorácicos",
             "C34", "Tumor maligno de los bronquios y del pulmón",
             "Tumor maligno de los bronquios o del pulmón, parte no especificada"),
    "C169": (*_CH_NEOPLASMS, "C15-C26", "Tumores malignos de los órganos digestivos", "C16",
             "Tumor maligno del estómago", "Tumor maligno del estómago, parte no especificada"),
    "E149": ("E00-E90", "Capítulo IV: Enfermedades endocrinas, nutricionales y metabólicas",
             "E10-E14", "Diabetes mellitus", "E14", "Diabetes mellitus, no especificada",
             "Diabetes mellitus, no especificada, sin mención de complicación"),
    "K746": ("K00-K93", "Capítulo XI: Enfermedades del sistema digestivo", "K70-K77",
             "Enfermedades del hígado", "K74", "Fibrosis y cirrosis del hígado",
             "Otras cirrosis del hígado y las no especificadas"),
    "G309": ("G00-G99", "Capítulo VI: Enfermedades del sistema nervioso", "G30-G32",
             "Otras enfermedades degenerativas del sistema nervioso", "G30", "Enfermedad de Alzheimer",
             "Enfermedad de Alzheimer, no especificada"),
    "N189": ("N00-N99", "Capítulo XIV: Enfermedades del sistema genitourinario", "N17-N19",
             "Insuficiencia renal", "N18", "Enfermedad renal crónica",
             "Enfermedad renal crónica, no especificada"),
    "S069": (*_CH_INJURY, "S00-S09", "Traumatismos de la cabeza", "S06", "Traumatismo intracraneal",
             "Traumatismo intracraneal, no especificado"),
    "T71X": (*_CH_INJURY, "T66-T78", "Otros efectos y los no especificados de causas externas", "T71",
             "Asfixia", "Asfixia"),
    "V892": (*_CH_EXTERNAL, "V80-V89", "Otros accidentes de transporte terrestre", "V89",
             "Accidente de vehículo de motor o sin motor, tipo de vehículo no especificado",
             "Persona lesionada en accidente de tránsito, de vehículo de motor no especificado"),
    "X700": (*_CH_EXTERNAL, "X60-X84", "Lesiones autoinfligidas intencionalmente", "X70",
             "Lesión autoinfligida intencionalmente por ahorcamiento, estrangulamiento o sofocación",
             "Lesión autoinfligida intencionalmente por ahorcamiento, estrangulamiento o "
             "sofocación, en vivienda"),
    "W780": (*_CH_EXTERNAL, "W75-W84", "Otros accidentes que obstruyen la respiración", "W78",
             "Inhalación de contenidos gástricos", "Inhalación de contenidos gástricos, en vivienda"),
    "P011": (*_CH_PERINATAL, "P00-P04", "Feto y recién nacido afectados por factores maternos y por "
             "complicaciones del embarazo, del trabajo de parto y del parto", "P01",
             "Feto y recién nacido afectados por complicaciones maternas del embarazo",
             "Feto y recién nacido afectados por ruptura prematura de las membranas"),
    "P285": (*_CH_PERINATAL, *_GR_PERINATAL_RESP, "P28", "Otros problemas respiratorios del recién "
             "nacido, originados en el período perinatal", "Insuficiencia respiratoria del recién nacido"),
    "P969": (*_CH_PERINATAL, "P90-P96", "Otros trastornos originados en el período perinatal", "P96",
             "Otras afecciones originadas en el período perinatal",
             "Afección no especificada originada en el período perinatal"),
    "J219": (*_CH_RESPIRATORY, "J20-J22", "Otras infecciones agudas de las vías respiratorias inferiores",
             "J21", "Bronquiolitis aguda", "Bronquiolitis aguda, no especificada"),
    "A099": (*_CH_INFECTIOUS, "A00-A09", "Enfermedades infecciosas intestinales", "A09",
             "Otras gastroenteritis y colitis de origen infeccioso y no especificado",
             "Gastroenteritis y colitis de origen no especificado"),
    "A379": (*_CH_INFECTIOUS, "A30-A49", "Otras enfermedades bacterianas", "A37", "Tos ferina",
             "Tos ferina, no especificada"),
    "A419": (*_CH_INFECTIOUS, "A30-A49", "Otras enfermedades bacterianas", "A41", "Otras sepsis",
             "Sepsis, no especificada"),
    "G009": ("G00-G99", "Capítulo VI: Enfermedades del sistema nervioso", "G00-G09",
             "Enfermedades inflamatorias del sistema nervioso central", "G00",
             "Meningitis bacteriana, no clasificada en otra parte", "Meningitis bacteriana, no especificada"),
    "E43X": ("E00-E90", "Capítulo IV: Enfermedades endocrinas, nutricionales y metabólicas", "E40-E46",
             "Desnutrición", "E43", "Desnutrición proteicocalórica severa, no especificada",
             "Desnutrición proteicocalórica severa, no especificada"),
    "I429": (*_CH_CIRCULATORY, "I30-I52", "Otras formas de enfermedad del corazón", "I42", "Cardiomiopatía",
             "Cardiomiopatía, no especificada"),
    "C910": (*_CH_NEOPLASMS, "C81-C96", "Tumores malignos del tejido linfático, de los órganos "
             "hematopoyéticos y de tejidos afines", "C91", "Leucemia linfoide", "Leucemia linfoblástica aguda"),
}

# SYNTHETIC: the ICD-9 code written for each ICD-10 code in years before 1997 (Chile coded causes
# of death in ICD-9 until 1996), so that the files have the real file's mix of revisions. Each is
# the ICD-9 code of the same condition (WHO ICD-9, 1977), the group staying the same chapter.
ICD10_FIRST_YEAR = 1997
ICD9 = {
    "P073": "7651", "P072": "7650", "P220": "769", "P219": "7689", "P369": "7718", "P011": "7611",
    "P285": "7708", "P969": "7799", "Q249": "7469", "Q897": "7597", "Q913": "7582", "R95X": "7980",
    "R99X": "7999", "J189": "486", "J219": "4661", "J449": "496", "A099": "0091", "A379": "0339",
    "A419": "0389", "G009": "3209", "E43X": "261", "E149": "2509", "I429": "4254", "I219": "4109",
    "I64X": "436", "I10X": "4019", "C349": "1629", "C169": "1519", "C910": "2040", "K746": "5715",
    "G309": "3310", "N189": "585", "S069": "8540", "T71X": "9947", "V892": "E8199", "X700": "E9530",
    "W780": "E911",
}
# SYNTHETIC: a few DIAG1 are blank or not a code at all, as in real registers (audited as
# cause_unknown / cause_invalid): P97X and D49X are no ICD-10 category, S/D no code shape.
BLANK_CAUSE_SHARE = 0.004
INVALID_CAUSE_SHARE = 0.002
INVALID_CAUSES = ("P97X", "D49X", "S/D")

# SYNTHETIC: (DIAG1, DIAG2 or None, weight) for each age group of the deceased, a plausible mix
# (not calibrated): neonatal deaths mostly perinatal conditions (P) and congenital malformations
# (Q); post-neonatal deaths more congenital, respiratory (J), ill-defined and sudden infant death
# (R), external (an injury in DIAG1, its external cause in DIAG2, as DEIS codes them) and
# infectious (A). Early neonatal: 72% perinatal, 26% congenital; late neonatal: 47% and 40%;
# post-neonatal: 36% congenital, 22% respiratory, 12% ill-defined, 7% external, 7% infectious.
CAUSES = {
    "early_neonatal": [("P073", None, 22), ("P072", None, 14), ("P220", None, 14), ("P219", None, 6),
                       ("P369", None, 6), ("P011", None, 5), ("P285", None, 4), ("P969", None, 1),
                       ("Q249", None, 14), ("Q897", None, 7), ("Q913", None, 5), ("R99X", None, 1),
                       ("A419", None, 1)],
    "late_neonatal": [("P369", None, 18), ("P073", None, 10), ("P072", None, 8), ("P220", None, 6),
                      ("P285", None, 4), ("P969", None, 1), ("Q249", None, 24), ("Q897", None, 9),
                      ("Q913", None, 7), ("A419", None, 4), ("J189", None, 3), ("G009", None, 2),
                      ("I429", None, 3), ("R99X", None, 1)],
    "post_neonatal": [("R95X", None, 9), ("R99X", None, 3), ("J189", None, 16), ("J219", None, 6),
                      ("Q249", None, 22), ("Q897", None, 6), ("Q913", None, 8), ("T71X", "W780", 6),
                      ("T71X", None, 1), ("A099", None, 3), ("A379", None, 1), ("A419", None, 3),
                      ("G009", None, 2), ("E43X", None, 1), ("I429", None, 5), ("C910", None, 2),
                      ("P369", None, 4), ("P073", None, 2)],
    "adult": [("I219", None, 12), ("I64X", None, 9), ("I10X", None, 5), ("C349", None, 6),
              ("C169", None, 5), ("J189", None, 8), ("J449", None, 5), ("E149", None, 6),
              ("K746", None, 4), ("G309", None, 5), ("N189", None, 3), ("R99X", None, 3),
              ("S069", "V892", 3), ("T71X", "X700", 2)],
}
PLACES = ("Hospital o Clínica", "Casa habitación", "Otro")
PLACE_WEIGHTS = {"infant": (0.88, 0.07, 0.05), "adult": (0.55, 0.35, 0.10)}
DEATH_SEXES = ("Hombre", "Mujer", "Indeterminado")

# Age at death of infants: unit shares (EDAD_TIPO 4 hours, 3 days, 2 months, 1 years with amount
# 0), then the amount within the unit. About 64% neonatal, as in the DEIS 1990-2019 file (hours
# 21,546, days 23,822, months 26,714 rows).
INFANT_UNIT_SHARES = {4: 0.30, 3: 0.35, 2: 0.345, 1: 0.005}
INFANT_AMOUNTS = {4: np.arange(0, 24), 3: np.arange(1, 30), 2: np.arange(1, 12), 1: np.array([0])}
INFANT_AMOUNT_DECAY = {4: 6.0, 3: 6.0, 2: 4.0, 1: 1.0}

# Median birth weight (g) and length (cm) by gestational week, for the births bases.
WEEKS = np.array([22, 28, 32, 36, 40, 42])
WEIGHT_BY_WEEK = np.array([500, 1100, 1700, 2700, 3450, 3600])
LENGTH_BY_WEEK = np.array([29, 37, 42, 47, 50, 51])


@dataclass(frozen=True)
class Options:
    out_dir: Path
    years: tuple[int, ...] = tuple(DEIS_YEARS)
    regions: tuple[str, ...] | None = None  # None: all 16 regions
    scale: float = 1.0
    seed: int = 1
    deaths_header: str = "none"           # none | standard | alternative
    deaths_encoding: str = "latin-1"
    zip_deaths: bool = False
    births_header: str = "standard"       # standard | alternative | none
    births_encoding: str = "latin-1"
    inject_bad_records: bool = False
    # births: compact (the 11 documented columns) or per_year_base (the 33-column DEIS bases,
    # with the codes in force in each year: Ñuble 084xx before 2018).
    births_layout: str = "compact"
    births_region: bool = True           # per_year_base: write REG_RES (False: drop the column)
    project_dir: Path = field(default_factory=lambda: default_project_dir())


def default_project_dir() -> Path:
    """The repository root (this module is <root>/python/infant_mortality/tools/generate_deis.py)."""
    return Path(__file__).resolve().parents[3]


# --------------------------------------------------------------------------------------------
# Commune-year counts
# --------------------------------------------------------------------------------------------

def load_communes(project_dir: Path) -> pd.DataFrame:
    communes = pd.read_csv(project_dir / "seeds" / "communes_chile.csv", dtype=str)
    return communes[["codigo_region", "nombre_region", "codigo_comuna", "nombre_comuna"]]


def select_communes(communes: pd.DataFrame, regions: tuple[str, ...] | None) -> pd.DataFrame:
    if regions is None:
        return communes
    wanted = {str(int(region)).zfill(2) for region in regions}
    unknown = wanted - set(communes["codigo_region"])
    if unknown:
        raise ValueError(f"unknown region code(s): {', '.join(sorted(unknown))}")
    return communes[communes["codigo_region"].isin(wanted)]


def imr_per_1000(years: np.ndarray) -> np.ndarray:
    """A realistic national infant mortality rate: 16 in 1990, about 6.5 recently."""
    return np.minimum(6.5 + 9.5 * np.exp(-(years - 1990) / 6.0), 35.0)


def _population_aged_0(project_dir: Path, codes: list[str], years: np.ndarray) -> np.ndarray:
    """INE population aged 0, commune x year, extrapolated outside 2002-2035."""
    population = pd.read_csv(project_dir / "data" / "raw" / "ine_population_by_commune_year_2002_2035.csv",
                             dtype={"codigo_comuna": str})
    table = population.pivot(index="codigo_comuna", columns="anio", values="poblacion_edad_0")
    table = table.reindex(index=codes, columns=list(POPULATION_YEARS))
    clipped = np.clip(years, POPULATION_YEARS.start, POPULATION_YEARS.stop - 1)
    base = table[clipped].to_numpy(dtype=float)
    trend = np.where(years < POPULATION_YEARS.start, 1 + 0.02 * (POPULATION_YEARS.start - years),
                     0.99 ** np.maximum(years - (POPULATION_YEARS.stop - 1), 0))
    return base * trend


def _calibrated_counts(project_dir: Path) -> pd.DataFrame:
    """RM 2010-2019: INE births and the derived infant deaths (INE all ages - DEIS aged 1+)."""
    raw = project_dir / "data" / "raw"
    ine = pd.read_csv(raw / "ine_vital_statistics_chile_2010_2019.csv", dtype={"codigo_comuna": str})
    ine = ine[ine["codigo_comuna"].str.startswith("13")]
    ine = ine.pivot_table(index=["codigo_comuna", "anio"], columns="evento", values="cantidad",
                          aggfunc="sum").reset_index()
    one_plus = deis_deaths_aged_1_plus(project_dir).groupby(["codigo_comuna", "anio"])["deaths"].sum()
    ine = ine.merge(one_plus.rename("deaths_1_plus").reset_index(), how="left",
                    on=["codigo_comuna", "anio"]).fillna({"deaths_1_plus": 0})
    ine["derived_infant_deaths"] = (ine["defuncion"] - ine["deaths_1_plus"]).astype(int)
    return ine.rename(columns={"nacimiento": "births"})[
        ["codigo_comuna", "anio", "births", "derived_infant_deaths"]]


def deis_deaths_aged_1_plus(project_dir: Path) -> pd.DataFrame:
    """Real DEIS deaths aged 1+ by commune (5-char code), year and sex, with their mean age."""
    deis = pd.read_csv(project_dir / "data" / "raw" / "deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv")
    deis = deis[deis["Age group"] == "1+"]
    return pd.DataFrame({
        "codigo_comuna": deis["CODIGO_COMUNA_RESIDENCIA"].astype(str).str.zfill(5),
        "anio": deis["Year"], "sex": deis["Gender"],
        "deaths": deis["Death_count_all_cause"], "mean_age": deis["Mean_age"],
    })


def expected_calibrated_counts(project_dir: Path | None = None) -> pd.DataFrame:
    """What the generator writes for RM 2010-2019 at scale 1 (derived infant deaths floored at 0)."""
    counts = _calibrated_counts(project_dir or default_project_dir())
    counts["infant_deaths"] = counts["derived_infant_deaths"].clip(lower=0)
    return counts


def commune_year_counts(options: Options, communes: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Births and infant deaths per commune and year in scope, and notes for the log."""
    all_codes = load_communes(options.project_dir)["codigo_comuna"].tolist()
    # Commune factors are drawn for all 346 communes, so a commune's factors do not depend on scope.
    factor_rng = np.random.default_rng([options.seed, 0])
    birth_factor = pd.Series(factor_rng.uniform(0.95, 1.05, len(all_codes)), index=all_codes)
    imr_factor = pd.Series(factor_rng.lognormal(-0.25 ** 2 / 2, 0.25, len(all_codes)), index=all_codes)

    codes = communes["codigo_comuna"].tolist()
    years = np.array(options.years)
    grid = pd.DataFrame({"codigo_comuna": np.repeat(codes, len(years)),
                         "anio": np.tile(years, len(codes))})
    rng = np.random.default_rng([options.seed, 1])
    mean_births = (_population_aged_0(options.project_dir, codes, years).ravel()
                   * np.repeat(birth_factor[codes].to_numpy(), len(years)) * options.scale)
    grid["births"] = rng.poisson(mean_births)
    mean_deaths = (grid["births"] * imr_per_1000(grid["anio"].to_numpy()) / 1000
                   * np.repeat(imr_factor[codes].to_numpy(), len(years)))
    grid["infant_deaths"] = rng.poisson(mean_deaths)
    grid["calibrated"] = False

    merged = grid.merge(_calibrated_counts(options.project_dir), how="left",
                        on=["codigo_comuna", "anio"], suffixes=("", "_real"))
    real = merged["births_real"].notna().to_numpy()
    derived = merged.loc[real, "derived_infant_deaths"]
    grid.loc[real, "births"] = np.rint(merged.loc[real, "births_real"] * options.scale).astype(int)
    grid.loc[real, "infant_deaths"] = np.rint(derived.clip(lower=0) * options.scale).astype(int)
    grid.loc[real, "calibrated"] = True
    notes = [f"commune {row.codigo_comuna} {row.anio}: INE deaths minus DEIS deaths aged 1+ is "
             f"{int(row.derived_infant_deaths)}; written as 0 infant deaths"
             for row in merged[real & (merged["derived_infant_deaths"] < 0).to_numpy()].itertuples()]
    return grid, notes


def adult_death_counts(options: Options, communes: pd.DataFrame) -> pd.DataFrame:
    """Deaths aged 1+ by commune, year and sex: real where DEIS has them, else extrapolated."""
    real = deis_deaths_aged_1_plus(options.project_dir)
    codes = communes["codigo_comuna"].tolist()
    if options.regions is None:
        codes.append(str(UNKNOWN_COMMUNE[0]))
    years = np.array(options.years)
    grid = pd.MultiIndex.from_product([codes, years, ["Hombre", "Mujer"]],
                                      names=["codigo_comuna", "anio", "sex"]).to_frame(index=False)
    grid = grid.merge(real, how="left", on=["codigo_comuna", "anio", "sex"])
    grid["deaths"] = np.rint(grid["deaths"].fillna(0) * options.scale).astype(int)

    outside = ~grid["anio"].isin(DEIS_YEARS)
    if outside.any():
        rng = np.random.default_rng([options.seed, 2])
        late = grid["anio"] > DEIS_YEARS.stop - 1
        window = real[real["codigo_comuna"].isin(codes)]
        recent = window[window["anio"] >= DEIS_YEARS.stop - 5].groupby(["codigo_comuna", "sex"])
        early = window[window["anio"] < DEIS_YEARS.start + 5].groupby(["codigo_comuna", "sex"])
        keys = pd.MultiIndex.from_frame(grid[["codigo_comuna", "sex"]])
        base = np.where(late, recent["deaths"].sum().reindex(keys).fillna(0).to_numpy() / 5,
                        early["deaths"].sum().reindex(keys).fillna(0).to_numpy() / 5)
        age = np.where(late, recent["mean_age"].mean().reindex(keys).to_numpy(),
                       early["mean_age"].mean().reindex(keys).to_numpy())
        anio = grid["anio"].to_numpy()
        trend = np.where(late, 1.02 ** (anio - (DEIS_YEARS.stop - 3)), 0.99 ** (DEIS_YEARS.start + 2 - anio))
        grid.loc[outside, "deaths"] = rng.poisson(base * trend * options.scale)[outside.to_numpy()]
        grid.loc[outside, "mean_age"] = age[outside.to_numpy()]
    grid["mean_age"] = grid["mean_age"].fillna(72.0)
    return grid


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------

def _categorical(codes: np.ndarray, values) -> pd.Categorical:
    """values[codes] as a categorical (code -1 is a missing value); values may repeat."""
    categories, inverse = np.unique(np.asarray(list(values), dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(np.where(codes < 0, -1, inverse[codes]), categories=categories)


def _random_dates(rng: np.random.Generator, years: np.ndarray) -> np.ndarray:
    starts = (years - 1970).astype("datetime64[Y]")
    lengths = ((starts + 1).astype("datetime64[D]") - starts.astype("datetime64[D]")).astype(int)
    return starts.astype("datetime64[D]") + (rng.random(len(years)) * lengths).astype(int)


def _decaying_choice(rng: np.random.Generator, values: np.ndarray, decay: float, size: int) -> np.ndarray:
    weights = np.exp(-(np.arange(len(values))) / decay)
    return rng.choice(values, size=size, p=weights / weights.sum())


def _infant_ages(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """EDAD_TIPO, EDAD_CANT and the age group (for the cause of death) of n infant deaths."""
    units = rng.choice(list(INFANT_UNIT_SHARES), size=n, p=list(INFANT_UNIT_SHARES.values()))
    amounts = np.zeros(n, dtype=int)
    for unit, values in INFANT_AMOUNTS.items():
        chosen = units == unit
        amounts[chosen] = _decaying_choice(rng, values, INFANT_AMOUNT_DECAY[unit], int(chosen.sum()))
    group = np.where((units == 4) | ((units == 3) & (amounts <= 6)), "early_neonatal",
                     np.where((units == 3) & (amounts <= 27), "late_neonatal", "post_neonatal"))
    return units, amounts, group


def _causes(rng: np.random.Generator, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices into ICD10 (DIAG1, and DIAG2 or -1) for each death, drawn by age group."""
    codes = list(ICD10)
    diag1 = np.zeros(len(groups), dtype=int)
    diag2 = np.full(len(groups), -1)
    for group, table in CAUSES.items():
        chosen = np.flatnonzero(groups == group)
        weights = np.array([weight for *_, weight in table], dtype=float)
        picks = rng.choice(len(table), size=len(chosen), p=weights / weights.sum())
        diag1[chosen] = np.array([codes.index(first) for first, _, _ in table])[picks]
        diag2[chosen] = np.array([codes.index(second) if second else -1 for _, second, _ in table])[picks]
    return diag1, diag2


def _cause_codes(options: Options, index: np.ndarray, year: np.ndarray, degrade: bool = False) -> np.ndarray:
    """The DIAG1/DIAG2 text of each death: the ICD-10 code of `index` (-1: none), its ICD-9 code
    before 1997; with `degrade`, a few blank or unusable codes (SYNTHETIC, own random stream)."""
    codes = np.asarray(list(ICD10), dtype=object)
    icd9 = np.asarray([ICD9[code] for code in ICD10], dtype=object)
    safe = np.maximum(index, 0)
    text = np.where(year < ICD10_FIRST_YEAR, icd9[safe], codes[safe])
    text = np.where(index < 0, None, text)
    if degrade:
        draw = np.random.default_rng([options.seed, 5]).random(len(index))
        invalid = np.random.default_rng([options.seed, 6]).integers(0, len(INVALID_CAUSES), len(index))
        text = np.where(draw < BLANK_CAUSE_SHARE, None, text)
        bad = (draw >= BLANK_CAUSE_SHARE) & (draw < BLANK_CAUSE_SHARE + INVALID_CAUSE_SHARE)
        text = np.where(bad, np.asarray(INVALID_CAUSES, dtype=object)[invalid], text)
    return text


def death_records(options: Options, communes: pd.DataFrame, counts: pd.DataFrame,
                  adults: pd.DataFrame) -> pd.DataFrame:
    """One row per death, in the 27 published columns, sorted by date of death and commune."""
    rng = np.random.default_rng([options.seed, 3])
    places = {**dict(zip(communes["codigo_comuna"], zip(communes["nombre_comuna"], communes["nombre_region"]))),
              str(UNKNOWN_COMMUNE[0]): UNKNOWN_COMMUNE[1:]}
    place_codes = list(places)

    n_infants = int(counts["infant_deaths"].sum())
    infant_cell = np.repeat(np.arange(len(counts)), counts["infant_deaths"].to_numpy())
    units, amounts, groups = _infant_ages(rng, n_infants)
    infant_sex = rng.choice(3, size=n_infants, p=[0.55, 0.4475, 0.0025])

    adult_cell = np.repeat(np.arange(len(adults)), adults["deaths"].to_numpy())
    n_adults = len(adult_cell)
    adult_age = np.clip(np.rint(rng.normal(adults["mean_age"].to_numpy()[adult_cell], 16.0)), 1, 105)

    commune = np.concatenate([counts["codigo_comuna"].to_numpy()[infant_cell],
                              adults["codigo_comuna"].to_numpy()[adult_cell]])
    commune_index = pd.Index(place_codes).get_indexer(commune)
    year = np.concatenate([counts["anio"].to_numpy()[infant_cell], adults["anio"].to_numpy()[adult_cell]])
    date = _random_dates(rng, year)
    sex = np.concatenate([infant_sex, (adults["sex"].to_numpy()[adult_cell] == "Mujer").astype(int)])
    unit = np.concatenate([units, np.ones(n_adults, dtype=int)])
    amount = np.concatenate([amounts, adult_age.astype(int)])
    diag1, diag2 = _causes(rng, np.concatenate([groups, np.full(n_adults, "adult")]))
    is_infant = np.arange(n_infants + n_adults) < n_infants
    place = np.where(is_infant, rng.choice(3, size=len(is_infant), p=PLACE_WEIGHTS["infant"]),
                     rng.choice(3, size=len(is_infant), p=PLACE_WEIGHTS["adult"]))

    order = np.lexsort((commune_index, date))
    icd_codes = list(ICD10)
    glosses = list(zip(*ICD10.values()))  # 7 tuples: chapter, its gloss, group, ..., subcategory gloss
    diag_text = {"DIAG1": _cause_codes(options, diag1, year, degrade=True), "DIAG2": _cause_codes(options, diag2, year)}
    frame = {
        "ANO_DEF": year[order],
        "FECHA_DEF": date[order],
        "GLOSA_SEXO": _categorical(sex[order], DEATH_SEXES),
        "EDAD_TIPO": unit[order],
        "EDAD_CANT": amount[order],
        "CODIGO_COMUNA_RESIDENCIA": np.array([int(code) for code in place_codes])[commune_index[order]],
        "GLOSA_COMUNA_RESIDENCIA": _categorical(commune_index[order], [places[c][0] for c in place_codes]),
        "GLOSA_REG_RES": _categorical(commune_index[order], [places[c][1] for c in place_codes]),
    }
    for suffix, index in (("DIAG1", diag1), ("DIAG2", diag2)):
        text = diag_text[suffix]
        # The ICD-10 glosses describe ICD-10 codes only: blank for ICD-9 years and unusable codes.
        glossed = np.where(text == np.asarray(icd_codes, dtype=object)[np.maximum(index, 0)], index, -1)[order]
        frame[suffix] = pd.Categorical(text[order])
        for name, values in zip(("CAPITULO", "GLOSA_CAPITULO", "CODIGO_GRUPO", "GLOSA_GRUPO",
                                 "CODIGO_CATEGORIA", "GLOSA_CATEGORIA"), glosses[:6]):
            frame[f"{name}_{suffix}"] = _categorical(glossed, values)
        frame[f"CODIGO_SUBCATEGORIA_{suffix}"] = pd.Categorical(np.where(text == "S/D", None, text)[order])
        frame[f"GLOSA_SUBCATEGORIA_{suffix}"] = _categorical(glossed, glosses[6])
    frame["LUGAR_DEFUNCION"] = _categorical(place[order], PLACES)
    return pd.DataFrame(frame)[list(DEATHS_COLUMNS)]


def birth_records(options: Options, communes: pd.DataFrame, counts: pd.DataFrame, year: int) -> pd.DataFrame:
    """One row per live birth of one year, in the births layout, sorted by date and commune."""
    rng = np.random.default_rng([options.seed, 4, year])
    of_year = counts[counts["anio"] == year]
    commune_index = np.repeat(pd.Index(communes["codigo_comuna"]).get_indexer(of_year["codigo_comuna"]),
                              of_year["births"].to_numpy())
    n = len(commune_index)
    date = _random_dates(rng, np.full(n, year))
    term = rng.random(n)
    weeks = np.where(term < 0.01, rng.integers(22, 32, n),
                     np.where(term < 0.08, rng.integers(32, 37, n),
                              np.clip(np.rint(rng.normal(39.2, 1.2, n)), 37, 42))).astype(int)
    weight = np.rint(np.interp(weeks, WEEKS, WEIGHT_BY_WEEK) * rng.normal(1.0, 0.12, n)).astype(int)
    length = np.rint(np.interp(weeks, WEEKS, LENGTH_BY_WEEK) + rng.normal(0.0, 1.8, n)).astype(int)
    order = np.lexsort((commune_index, date))
    months = date.astype("datetime64[M]")
    return pd.DataFrame({
        "ANO_NAC": np.full(n, year),
        "MES_NAC": (months.astype(int) % 12 + 1)[order],
        "DIA_NAC": ((date - months.astype("datetime64[D]")).astype(int) + 1)[order],
        "SEXO": rng.choice([1, 2, 9], size=n, p=[0.512, 0.4878, 0.0002]),
        "PESO": np.clip(weight, 300, 6000)[order],
        "TALLA": np.clip(length, 25, 60)[order],
        "SEMANAS": weeks[order],
        "EDAD_M": np.clip(np.rint(rng.normal(28.5, 6.5, n)), 13, 50).astype(int),
        "COMUNA": communes["codigo_comuna"].astype(int).to_numpy()[commune_index[order]],
        "GLOSA_COMUNA": _categorical(commune_index[order], communes["nombre_comuna"]),
        "REGION": communes["codigo_region"].astype(int).to_numpy()[commune_index[order]],
    })[list(BIRTHS_COLUMNS)]


# --------------------------------------------------------------------------------------------
# Bad records (--inject-bad-records): appended after the generated rows
# --------------------------------------------------------------------------------------------

def bad_death_lines(year: int) -> list[tuple[dict, str, str, str]]:
    """(changes to a valid death at 2 days, what is wrong, expected record_problem and age_class)."""
    code, name = "CODIGO_COMUNA_RESIDENCIA", "GLOSA_COMUNA_RESIDENCIA"
    early = "early_neonatal"
    return [
        ({code: "13999"}, "commune code not in the reference list", "commune_unknown", early),
        ({code: "", name: ""}, "blank commune", "commune_missing", early),
        ({code: "99999", name: "Ignorada"}, "commune 99999 (unknown)", "commune_missing", early),
        ({"EDAD_TIPO": ""}, "blank age unit", "age_unit_unknown", "age_unit_unknown"),
        ({"EDAD_TIPO": "9"}, "age unit 9", "age_unit_unknown", "age_unit_unknown"),
        ({"EDAD_TIPO": "0"}, "age unit 0", "age_unit_unknown", "age_unit_unknown"),
        ({"EDAD_TIPO": "2", "EDAD_CANT": "14"}, "14 months", "age_out_of_range", "not_infant"),
        ({"EDAD_TIPO": "4", "EDAD_CANT": "30"}, "30 hours", "age_out_of_range", early),
        ({"EDAD_TIPO": "3", "EDAD_CANT": "400"}, "400 days", "age_out_of_range", "not_infant"),
        ({"EDAD_CANT": "NN"}, "age amount not a number", "age_unparseable", "infant_age_unknown"),
        ({"EDAD_TIPO": "2", "EDAD_CANT": "0"}, "0 months", "infant_age_month_zero", "infant_age_unknown"),
        ({"FECHA_DEF": f"{year}-02-30"}, "impossible date", "unparseable_date", early),
        ({"FECHA_DEF": "sin dato"}, "date not a date", "unparseable_date", early),
        ({"FECHA_DEF": f"{year - 1}-12-31"}, "date in the year before ANO_DEF", "date_year_mismatch", early),
        ({"ANO_DEF": "AAAA"}, "year not a number", "year_unparseable", early),
    ]


def bad_birth_lines(year: int) -> list[tuple[dict, str, str, None]]:
    return [
        ({"COMUNA": "", "GLOSA_COMUNA": ""}, "blank commune", "commune_missing", None),
        ({"COMUNA": "13999"}, "commune code not in the reference list", "commune_unknown", None),
        ({"COMUNA": "99999", "GLOSA_COMUNA": "Ignorada"}, "commune 99999 (unknown)", "commune_missing",
         None),
        ({"MES_NAC": "13"}, "month 13", "unparseable_date", None),
        ({"MES_NAC": "2", "DIA_NAC": "30"}, "30 February", "unparseable_date", None),
    ]


def _bad_lines(template: dict, cases: list, columns, file: str, first_line: int,
               listed: list) -> list[list[str]]:
    """The fields of each bad record (a valid template with the case's changes); lists each one."""
    lines = []
    for offset, (changes, what, problem, age_class) in enumerate(cases):
        fields = {**template, **changes}
        lines.append([fields.get(column, "") for column in columns])
        entry = {"file": file, "line": first_line + offset, "what": what, "record_problem": problem}
        listed.append(entry if age_class is None else {**entry, "age_class": age_class})
    return lines


def _death_template(year: int, code: str, name: str, region: str) -> dict:
    diag = ICD10["P073"]
    return {
        "ANO_DEF": str(year), "FECHA_DEF": f"{year}-06-15", "GLOSA_SEXO": "Mujer", "EDAD_TIPO": "3",
        "EDAD_CANT": "2", "CODIGO_COMUNA_RESIDENCIA": str(int(code)), "GLOSA_COMUNA_RESIDENCIA": name,
        "GLOSA_REG_RES": region, "DIAG1": "P073", "CAPITULO_DIAG1": diag[0],
        "GLOSA_CAPITULO_DIAG1": diag[1], "CODIGO_GRUPO_DIAG1": diag[2], "GLOSA_GRUPO_DIAG1": diag[3],
        "CODIGO_CATEGORIA_DIAG1": diag[4], "GLOSA_CATEGORIA_DIAG1": diag[5],
        "CODIGO_SUBCATEGORIA_DIAG1": "P073", "GLOSA_SUBCATEGORIA_DIAG1": diag[6],
        "LUGAR_DEFUNCION": PLACES[0],
    }


def _birth_template(year: int, code: str, name: str, region: str) -> dict:
    return {"ANO_NAC": str(year), "MES_NAC": "6", "DIA_NAC": "15", "SEXO": "2", "PESO": "3300",
            "TALLA": "50", "SEMANAS": "39", "EDAD_M": "29", "COMUNA": str(int(code)),
            "GLOSA_COMUNA": name, "REGION": str(int(region))}


# --------------------------------------------------------------------------------------------
# The DEIS per-year births bases: 33 columns, codes in force in their year
# --------------------------------------------------------------------------------------------

# The per-year bases carry the codes in force in their year: before Ñuble (2018), Marga Marga
# (2010), Arica y Parinacota, Los Ríos and Tamarugal (2007) their communes had the older codes of the
# project's crosswalk seed, which holds the official pairs and the last year of each old code.
def historical_codes(project_dir: Path) -> dict[str, tuple[str, int]]:
    """Current code -> (old code, last year it may appear) for every renumbered commune."""
    crosswalk = pd.read_csv(project_dir / "seeds" / "commune_code_crosswalk.csv", dtype=str)
    renumbered = crosswalk[crosswalk["mapping"] == "renumbered"]
    return {new: (old, int(to_year))
            for new, old, to_year in zip(renumbered["new_code"], renumbered["old_code"], renumbered["valid_to_year"])}


def _code_in_force(code: int, year: int, old_codes: dict[str, tuple[str, int]]) -> int:
    """The old code in the years before its last year (in that year a base may use either: the
    generator writes the new one)."""
    old, last_year = old_codes.get(str(code).zfill(5), (None, 0))
    return int(old) if year < last_year else code


def per_year_base(births: pd.DataFrame, year: int, with_region: bool) -> tuple[pd.DataFrame, list[str]]:
    """The compact frame as a DEIS per-year base: 33 columns (other fields blank), codes in force."""
    old_codes = historical_codes(default_project_dir())
    codes = births["COMUNA"].map(lambda code: _code_in_force(int(code), year, old_codes))
    frame = pd.DataFrame({column: pd.Series([""] * len(births), dtype="string")
                          for column in BIRTHS_PER_YEAR_COLUMNS})
    for column in ("SEXO", "DIA_NAC", "MES_NAC", "ANO_NAC", "PESO", "SEMANAS", "TALLA", "EDAD_M"):
        frame[column] = births[column].astype(str).to_numpy()
    frame["COMUNA"] = codes.astype(str).to_numpy()
    frame["REG_RES"] = (codes // 1000).astype(str).to_numpy()
    columns = [c for c in BIRTHS_PER_YEAR_COLUMNS if with_region or c != "REG_RES"]
    return frame[columns], columns


def _per_year_fields(compact: list[str], year: int, with_region: bool) -> list[str]:
    """A compact bad-record line as a per-year base line (same values, 33-column order)."""
    values = dict(zip(BIRTHS_COLUMNS, compact))
    values["REG_RES"] = values.get("REGION", "")
    return [values.get(c, "") for c in BIRTHS_PER_YEAR_COLUMNS if with_region or c != "REG_RES"]


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

def _header_names(columns, header: str, alternatives: dict) -> list[str] | None:
    if header == "none":
        return None
    return [alternatives.get(c, c) if header == "alternative" else c for c in columns]


def write_csv(frame: pd.DataFrame, path: Path, header: list[str] | None, encoding: str,
              extra_lines: list[list[str]] = ()) -> None:
    """DuckDB writes the rows (UTF-8); extra lines are appended; then transcoded if latin-1."""
    names = header or list(frame.columns)
    select = ", ".join(
        f'cast("{column}" as date) as "{name}"' if column.startswith("FECHA") else f'"{column}" as "{name}"'
        for column, name in zip(frame.columns, names))
    utf8_path = path.with_name(path.name + ".utf8")
    with duckdb.connect() as conn:
        conn.execute("set enable_progress_bar = false")
        conn.register("records", frame)
        conn.execute(f"copy (select {select} from records) to '{utf8_path}' "
                     f"(format csv, delimiter ';', header {str(header is not None).lower()}, quote '\"')")
    if extra_lines:
        with open(utf8_path, "a", encoding="utf-8", newline="") as handle:
            handle.writelines(";".join(fields) + "\n" for fields in extra_lines)
    if encoding == "utf-8":
        os.replace(utf8_path, path)
        return
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(utf8_path, "rb") as source, open(path, "wb") as sink:
        while chunk := source.read(32 * 1024 * 1024):
            sink.write(decoder.decode(chunk).encode(encoding))
        sink.write(decoder.decode(b"", final=True).encode(encoding))
    utf8_path.unlink()


def _zip_in_place(csv_path: Path, year: int) -> Path:
    """Replace the CSV by a published-style ZIP holding it (fixed timestamp: same bytes each run)."""
    zip_path = csv_path.with_suffix(".zip")
    info = zipfile.ZipInfo(csv_path.name, date_time=(max(year, 1980), 12, 31, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(zip_path, "w") as archive, open(csv_path, "rb") as source, \
            archive.open(info, "w", force_zip64=True) as member:
        while chunk := source.read(32 * 1024 * 1024):
            member.write(chunk)
    csv_path.unlink()
    return zip_path


def generate(options: Options) -> dict:
    """Write the deaths file and one births file per year; return the manifest (also written)."""
    if options.scale <= 0:
        raise ValueError("scale must be positive")
    started = time.perf_counter()
    out = Path(options.out_dir)
    (out / "nacimientos").mkdir(parents=True, exist_ok=True)
    communes = select_communes(load_communes(options.project_dir), options.regions)
    counts, notes = commune_year_counts(options, communes)
    adults = adult_death_counts(options, communes)
    for note in notes:
        log.warning(note)

    first_year, last_year = min(options.years), max(options.years)
    template_place = tuple(communes.iloc[0][["codigo_comuna", "nombre_comuna", "nombre_region"]])
    bad = []

    deaths = death_records(options, communes, counts, adults)
    # Never the official file names: the warehouse recognises generated files by this prefix
    # and says so in count_basis.
    deaths_path = out / f"{GENERATED_PREFIX}deaths_{first_year}_{last_year}.csv"
    deaths_header = _header_names(DEATHS_COLUMNS, options.deaths_header, DEATHS_ALTERNATIVE_NAMES)
    extra = []
    if options.inject_bad_records:
        extra = _bad_lines(_death_template(last_year, *template_place), bad_death_lines(last_year),
                           DEATHS_COLUMNS, deaths_path.name, len(deaths) + (2 if deaths_header else 1), bad)
    write_csv(deaths, deaths_path, deaths_header, options.deaths_encoding, extra)
    n_deaths = len(deaths)
    unit, amount = deaths["EDAD_TIPO"], deaths["EDAD_CANT"]
    neonatal = int(((unit == 4) | ((unit == 3) & (amount <= 27))).sum())
    del deaths
    if options.zip_deaths:
        deaths_path = _zip_in_place(deaths_path, last_year)

    births_header = _header_names(BIRTHS_COLUMNS, options.births_header, BIRTHS_ALTERNATIVE_NAMES)
    for year in options.years:
        path = out / "nacimientos" / f"{GENERATED_PREFIX}births_{year}.csv"
        births = birth_records(options, communes, counts, year)
        extra = []
        if options.inject_bad_records and year == last_year:
            extra = _bad_lines(_birth_template(year, *template_place[:2], template_place[0][:2]),
                               bad_birth_lines(year), BIRTHS_COLUMNS, f"nacimientos/{path.name}",
                               len(births) + (2 if births_header else 1), bad)
        if options.births_layout == "per_year_base":
            births, header = per_year_base(births, year, options.births_region)
            extra = [_per_year_fields(fields, year, options.births_region) for fields in extra]
            write_csv(births, path, header, options.births_encoding, extra)
        else:
            write_csv(births, path, births_header, options.births_encoding, extra)

    infants = int(counts["infant_deaths"].sum())
    manifest = {
        "notice": SYNTHETIC_NOTICE,
        "options": {**{k: v for k, v in asdict(options).items() if k not in ("out_dir", "project_dir")},
                    "years": ",".join(map(str, options.years)) if len(options.years) != last_year - first_year + 1
                    else f"{first_year}-{last_year}"},
        "communes": len(communes),
        # Relative to the output folder, so that the manifest too is the same bytes for the same arguments.
        "deaths_file": deaths_path.name,
        "births_folder": "nacimientos",
        "records": {"deaths": n_deaths, "infant_deaths": infants, "deaths_aged_1_plus": n_deaths - infants,
                    "births": int(counts["births"].sum())},
        "neonatal_share_of_infant_deaths": round(neonatal / infants, 4) if infants else None,
        "calibrated_commune_years": int(counts["calibrated"].sum()),
        "notes": notes,
        "bad_records": bad,
    }
    (out / "generation_manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                                  encoding="utf-8")
    log.info("wrote %s deaths (%s infant) and %s births for %s communes x %s years in %.1f s",
             f"{n_deaths:,}", f"{infants:,}", f"{manifest['records']['births']:,}", len(communes),
             len(options.years), time.perf_counter() - started)
    return manifest


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

def parse_years(text: str) -> tuple[int, ...]:
    """'1990-2019', '2015' or '2010,2012,2014'."""
    years = []
    for part in text.split(","):
        start, _, end = part.strip().partition("-")
        years.extend(range(int(start), int(end or start) + 1))
    return tuple(sorted(set(years)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="imr-generate-deis",
        description="Write DEIS-layout death and birth microdata (docs/using/deis-layouts.md): "
                    "synthetic_deis_deaths_<from>_<to>.csv (or .zip) and "
                    "nacimientos/synthetic_deis_births_<year>.csv (never the official file names). "
                    + SYNTHETIC_NOTICE + " Región "
                    "Metropolitana 2010-2019 births and infant deaths equal the bundled INE/DEIS "
                    "counts; deaths aged 1+ equal the real DEIS counts for 1990-2019.")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--regions", nargs="+", metavar="CODE", help="region codes (e.g. 13 or 5 8); default all 16")
    parser.add_argument("--years", default="1990-2019", type=parse_years,
                        help="e.g. 1990-2019 (default), 2015 or 2010,2012")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply all counts (benchmarks); default 1")
    parser.add_argument("--seed", type=int, default=1, help="random seed; same arguments, same bytes")
    parser.add_argument("--deaths-header", choices=["none", "standard", "alternative"], default="none",
                        help="none (as the official 1990-2019 file), DEIS names, or AÑO/SEXO_NOMBRE/COD_COMUNA/...")
    parser.add_argument("--deaths-encoding", choices=["latin-1", "utf-8"], default="latin-1")
    parser.add_argument("--zip", action="store_true", help="deaths as a published ZIP holding the CSV")
    parser.add_argument("--births-header", choices=["standard", "alternative", "none"], default="standard")
    parser.add_argument("--births-encoding", choices=["latin-1", "utf-8"], default="latin-1")
    parser.add_argument("--births-layout", choices=["compact", "per_year_base"], default="compact",
                        help="compact (11 columns) or the 33-column DEIS per-year bases (codes in force "
                             "in each year: Ñuble 084xx before 2018)")
    parser.add_argument("--births-without-region", action="store_true",
                        help="per_year_base without the REG_RES column")
    parser.add_argument("--inject-bad-records", action="store_true",
                        help="append records with known problems (listed in generation_manifest.json)")
    parser.add_argument("--project-dir", type=Path, default=default_project_dir(),
                        help="repository root holding seeds/ and data/raw/")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    manifest = generate(Options(
        out_dir=args.out, years=args.years, regions=tuple(args.regions) if args.regions else None,
        scale=args.scale, seed=args.seed, deaths_header=args.deaths_header,
        deaths_encoding=args.deaths_encoding, zip_deaths=args.zip, births_header=args.births_header,
        births_encoding=args.births_encoding, inject_bad_records=args.inject_bad_records,
        births_layout=args.births_layout, births_region=not args.births_without_region,
        project_dir=args.project_dir))
    dbt_vars = {"vital_source": "deis_microdata",
                "deis_deaths_path": str(args.out / manifest["deaths_file"]),
                "deis_births_path": str(args.out / manifest["births_folder"])}
    print(json.dumps(dbt_vars, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
