"""The few members of dbt's Jinja context that our macros use, for SQLFluff's jinja templater.

SQLFluff renders models with the project's real macros (`.sqlfluff`: load_macros_from_path) and
its own stand-ins for ref/source/config/return; this module adds what they lack, so linting
needs no database and no dbt parse: `var` answers the defaults declared in dbt_project.yml,
`execute` is false (as in dbt's parse phase: no query runs).
"""

import copy
import datetime
import re
import sys
import types
from pathlib import Path

import yaml

# SQLFluff executes this module again for every file it renders, so a cache in its own globals
# would start empty each time: the texts already parsed (dbt_project.yml, the macros' YAML
# blocks, parsed about ten times a file) are kept in a module of their own, imported once.
_CACHE = sys.modules.setdefault("_sqlfluff_dbt_context_cache", types.ModuleType("_sqlfluff_dbt_context_cache"))
_PARSED: dict = _CACHE.__dict__.setdefault("parsed", {})


def _parsed(text):
    if text not in _PARSED:
        _PARSED[text] = yaml.safe_load(text)
    return copy.deepcopy(_PARSED[text])  # a macro may change what it was given


_PROJECT = Path(__file__).resolve().parents[2] / "dbt_project.yml"
_VARS = _parsed(_PROJECT.read_text(encoding="utf-8"))["vars"]

execute = False
invocation_args_dict: dict = {}
modules = types.SimpleNamespace(re=re, datetime=datetime)
# Run metadata that meta_build records (fixed stand-ins: linting runs no build).
invocation_id = "00000000-0000-0000-0000-000000000000"
run_started_at = datetime.datetime(2000, 1, 1)
dbt_version = "0.0.0"


def var(name, default=None):
    return _VARS.get(name, default)


def fromyaml(text, default=None):
    try:
        return _parsed(text)
    except yaml.YAMLError:
        return default


def _raise_compiler_error(message):
    raise RuntimeError(message)


exceptions = types.SimpleNamespace(raise_compiler_error=_raise_compiler_error)


def _listagg(measure, delimiter_text="','", order_by_clause=None, limit_num=None):
    # What dbt-duckdb's duckdb__listagg renders (without limit_num, which the project does not use).
    return f"string_agg({measure}, {delimiter_text} {order_by_clause or ''})"


# dbt's cross-database macros called as dbt.<name>(...).
dbt = types.SimpleNamespace(listagg=_listagg)
