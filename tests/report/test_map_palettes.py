"""The map's class palettes (report/style.py) for readers with colour-vision deficiency, the classes
of the BYM2 probability of exceeding, and the cluster types against the mart's own list. No
warehouse needed.

Colour blindness is simulated with Machado, Oliveira and Fernandes (2009, IEEE TVCG 15:1291-1298),
severity 1, on linear RGB; colours are compared by CIE76 ΔE*ab in CIELAB (D65). A ΔE above about 10
is told apart at a glance on a map.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import yaml

from conftest import REPO_ROOT
from infant_mortality.report.bym2_clusters import exceedance_class
from infant_mortality.report.context import RenderContext
from infant_mortality.report.i18n import MESSAGES
from infant_mortality.report.labels import cluster_label, exceedance_class_label
from infant_mortality.report.style import (
    CLUSTER_COLOURS,
    CLUSTER_PATTERNS,
    EXCEEDANCE_COLOURS,
    ISLAND_PATTERN,
    NO_DATA,
    NO_DATA_PATTERN,
    TREND_PATTERNS,
)

MACHADO = {
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}
SRGB_TO_XYZ = [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]
D65 = (0.95047, 1.0, 1.08883)
APART = 12.0  # the least ΔE*ab between two classes of one map, under every simulation


def linear_rgb(hex_colour: str) -> np.ndarray:
    c = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def lab(linear: np.ndarray) -> np.ndarray:
    xyz = np.array(SRGB_TO_XYZ) @ np.clip(linear, 0, 1) / np.array(D65)
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen(hex_colour: str, deficiency: str | None) -> np.ndarray:
    rgb = linear_rgb(hex_colour)
    return lab(rgb if deficiency is None else np.array(MACHADO[deficiency]) @ rgb)


def closest_pair(colours, deficiency: str | None) -> tuple[float, tuple]:
    return min((float(np.linalg.norm(seen(a, deficiency) - seen(b, deficiency))), (a, b))
               for a, b in itertools.combinations(colours, 2))


def test_the_simulation_collapses_red_and_green_and_keeps_black_and_white():
    """The check can fail: dark red and dark green (CSS darkred, darkgreen), 95 apart, look alike
    to a deuteranope (4.3)."""
    assert closest_pair(["#8b0000", "#006400"], None)[0] > 90
    assert closest_pair(["#8b0000", "#006400"], "deuteranopia")[0] < APART / 2
    assert closest_pair(["#000000", "#ffffff"], "deuteranopia")[0] == pytest.approx(100, abs=0.1)


@pytest.mark.parametrize("deficiency", [None, *MACHADO])
@pytest.mark.parametrize("palette", ["clusters", "exceedance"])
def test_the_map_classes_stay_apart_for_colour_blind_readers(palette, deficiency):
    """Every pair of cluster types (with the fill of a commune without a value) and every pair of
    the five probability classes differ by ΔE*ab > 12 as seen with each deficiency. Measured: the
    closest cluster pair (the grey of "not significant" and that of "no estimate") at 14.2; the
    white of "no neighbours" is also dotted."""
    colours = list(CLUSTER_COLOURS.values()) if palette == "clusters" else list(EXCEEDANCE_COLOURS)
    if palette == "clusters":
        colours = [c for c in colours if c != "#ffffff"] + [NO_DATA]
    distance, pair = closest_pair(colours, deficiency)
    assert distance > APART, (palette, deficiency, pair, distance)


def test_colour_is_not_the_only_channel():
    """Each cluster type has its own hatching; islands have theirs, unlike any probability class."""
    assert len(set(CLUSTER_PATTERNS.values())) == len(CLUSTER_PATTERNS) == len(CLUSTER_COLOURS)
    assert ISLAND_PATTERN not in ("", None)


@pytest.mark.parametrize("deficiency", [None, *MACHADO])
def test_a_commune_without_an_estimate_is_told_from_every_class_on_its_map(deficiency):
    """On the probability map the grey of "no estimate" is as light as the middle class (P 0.2 to
    0.8, ColorBrewer's #f7f7f7): measured ΔE*ab 2.4, so it looks like "no evidence either way"
    unless it is hatched. Its hatching is one no class, island, cluster type or trend class has."""
    distance = float(np.linalg.norm(seen(NO_DATA, deficiency) - seen(EXCEEDANCE_COLOURS[2], deficiency)))
    assert distance < APART  # why the hatching is needed: colour alone does not tell them apart
    assert NO_DATA_PATTERN not in {"", ISLAND_PATTERN, *CLUSTER_PATTERNS.values(), *TREND_PATTERNS.values()}


def test_the_cluster_types_are_the_marts():
    """The report knows exactly the types fct_spatial_clusters' contract allows, named in both languages."""
    model = yaml.safe_load((REPO_ROOT / "models" / "maps" / "fct_spatial_clusters.yml").read_text(encoding="utf-8"))
    checks = " ".join(c.get("expression", "") for c in model["models"][0]["constraints"])
    allowed = re.search(r"cluster_type in \(([^)]*)\)", checks).group(1)
    assert set(re.findall(r"'([^']+)'", allowed)) == set(CLUSTER_COLOURS)
    for ty in CLUSTER_COLOURS:
        es, en = MESSAGES[f"cluster.{ty}"]
        assert es and en and es != en
    with pytest.raises(ValueError, match="unknown cluster type 'hot'"):
        cluster_label("hot")


@pytest.mark.parametrize("p, expected", [
    (0.0, 0), (0.0499, 0), (0.05, 1), (0.1999, 1), (0.2, 2), (0.5, 2), (0.8, 2), (0.8001, 3), (0.95, 3),
    (0.9501, 4), (1.0, 4), (None, None),
])
def test_the_probability_classes(p, expected):
    """< 0.05, 0.05-0.2, 0.2-0.8, 0.8-0.95, > 0.95: the top class is the outline's "> 0.95"."""
    assert exceedance_class(p) == expected


@pytest.mark.parametrize("lang, labels", [
    ("es", ["P < 0,05", "P de 0,05 a 0,2", "P de 0,2 a 0,8", "P de 0,8 a 0,95", "P > 0,95"]),
    ("en", ["P < 0.05", "P 0.05 to 0.2", "P 0.2 to 0.8", "P 0.8 to 0.95", "P > 0.95"]),
])
def test_the_probability_classes_are_named_in_each_language(lang, labels):
    with RenderContext(language=lang).active():
        assert [exceedance_class_label(k) for k in range(5)] == labels
