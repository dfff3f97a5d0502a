"""The render context: what one rendering of the report is drawn in (the page's language, the
indicators as `marts.dim_indicator` names them, the build's interval level of the trends).

A frozen `RenderContext` is made once per render (`RenderContext.of(marts, lang)` in
`page.build_html`) and passed down to the section builders. While it is `active()`, the
catalogue (`i18n.t`) and the formats read it through `current()`; outside a render the default
context holds (Spanish, no indicator named, 95%). Nothing is set at module level, so a
render leaves no state behind for the next one.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

LANGUAGES = ("es", "en")
DEFAULT_LANGUAGE = "es"


@dataclass(frozen=True)
class Indicator:
    """A row of `marts.dim_indicator` as the report names it; `multiplier` is the rate's unit
    (the marts' rates are per `multiplier` live births; None: not known, for an indicator the
    dimension does not name)."""

    code: str
    abbreviation_es: str
    name_es: str
    ages_es: str
    abbreviation_en: str
    name_en: str
    ages_en: str
    multiplier: int | None

    @classmethod
    def unnamed(cls, code: str) -> "Indicator":
        """An indicator the dimension does not name: its code stands for its names."""
        return cls(code, code.upper(), code, "", code.upper(), code, "", None)


@dataclass(frozen=True)
class RenderContext:
    language: str = DEFAULT_LANGUAGE
    indicators: tuple[Indicator, ...] = ()  # marts.dim_indicator's rows, in its order (sort_order)
    trend_ci_level: float = 0.95  # the confidence level of the trends' APC intervals (meta_build.trend_ci_level)
    _by_code: dict = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self):
        if self.language not in LANGUAGES:
            raise ValueError(f"unknown report language {self.language!r}: use one of {', '.join(LANGUAGES)}")
        object.__setattr__(self, "indicators", tuple(self.indicators))
        object.__setattr__(self, "_by_code", {i.code: i for i in self.indicators})

    @classmethod
    def of(cls, marts, lang: str = DEFAULT_LANGUAGE) -> "RenderContext":
        """The context of one render of `marts` (`report.marts.Marts`) in the language `lang`."""
        return cls(language=lang, indicators=tuple(marts.indicators),
                   trend_ci_level=float(marts.settings.trend_ci_level))

    def indicator(self, code: str) -> Indicator:
        return self._by_code.get(code) or Indicator.unnamed(code)

    @contextmanager
    def active(self):
        """Make this the context `current()` returns, for the duration of a `with` block."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)


_CURRENT: ContextVar[RenderContext] = ContextVar("infant_mortality_report_context", default=RenderContext())


def current() -> RenderContext:
    """The context of the render under way (the default one outside a render)."""
    return _CURRENT.get()
