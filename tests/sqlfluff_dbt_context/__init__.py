"""The few members of dbt's Jinja context that our macros use, for SQLFluff's jinja templater.

SQLFluff renders models with the project's real macros (`.sqlfluff`: load_macros_from_path) and
its own stand-ins for ref/source/config/return; this module adds what they lack, so linting
needs no database and no dbt parse: `var` answers the defaults declared in dbt_project.yml,
`execute` is false (as in dbt's parse phase: no query runs).
"""

import re
import types
from pathlib import Path

import yaml

_PROJECT = Path(__file__).resolve().parents[2] / "dbt_project.yml"
_VARS = yaml.safe_load(_PROJECT.read_text(encoding="utf-8"))["vars"]

execute = False
invocation_args_dict: dict = {}
modules = types.SimpleNamespace(re=re)


def var(name, default=None):
    return _VARS.get(name, default)


def fromyaml(text, default=None):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return default


def _raise_compiler_error(message):
    raise RuntimeError(message)


exceptions = types.SimpleNamespace(raise_compiler_error=_raise_compiler_error)
