"""Trend fitters, chosen by name (``fct_trends`` fits the methods of ``trends.MART_METHODS``).

Adding a method: write one module in this package with a fitter class (the interface is in
``base``) and add one line to ``FITTERS``: name -> (module, class, fixed keyword options).
"""

from __future__ import annotations

import dataclasses
import importlib

from infant_mortality.statistics.trend_fitters.base import METHOD_COLUMNS, SeriesData, SeriesFits

FITTERS: dict[str, tuple[str, str, dict]] = {
    "prais": ("prais", "PraisWinstenFitter", {"method": "prais"}),
    "corc": ("prais", "PraisWinstenFitter", {"method": "corc"}),
    "ols": ("ols", "OlsFitter", {}),
    "poisson": ("poisson", "PoissonFitter", {}),
    "joinpoint": ("joinpoint", "JoinpointFitter", {}),
}

__all__ = ["FITTERS", "METHOD_COLUMNS", "SeriesData", "SeriesFits", "get_fitter"]


def get_fitter(name: str, **options):
    """The fitter registered as ``name``, built with the ``options`` its class declares."""
    if name not in FITTERS:
        raise ValueError(f"trend method must be one of {tuple(FITTERS)}, got {name!r}")
    module, cls_name, fixed = FITTERS[name]
    cls = getattr(importlib.import_module(f"{__name__}.{module}"), cls_name)
    declared = {f.name for f in dataclasses.fields(cls)}
    return cls(**fixed, **{k: v for k, v in options.items() if k in declared and k not in fixed})
