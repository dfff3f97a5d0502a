"""The environment install (`make .venv/.installed`: tools/install_env.py) and the progress lines
of long steps (tools/progress.py, publish's dbt status): issue 44, a fast locked install and
nothing silent for more than 5 s."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from infant_mortality.tools.install_env import locked_requirements, pinned
from infant_mortality.tools.progress import SILENCE, Heartbeat
from infant_mortality.tools.publish import DbtProgress

INSTALLER = REPO_ROOT / "python" / "infant_mortality" / "tools" / "install_env.py"


def test_the_lock_pins_every_package_and_both_installers():
    text = (REPO_ROOT / "requirements.lock").read_text(encoding="utf-8")
    requirements = locked_requirements(text)
    assert requirements and all(re.fullmatch(r"[A-Za-z0-9._-]+==[^\s=]+", line) for line in requirements)
    assert re.fullmatch(r"uv==\d+\.\d+\.\d+", pinned(text, "uv"))
    assert re.fullmatch(r"pip==\d+[\d.]*", pinned(text, "pip"))
    assert pinned("Jinja2==3.1.6\n# x\n\nduckdb_engine==0.17.0  # comment\n", "duckdb-engine") == "duckdb-engine==0.17.0"


def test_makefile_installs_with_the_system_python_through_the_installer():
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    rule = makefile.split("$(STAMP): requirements.lock pyproject.toml\n", 1)[1].split("\n\n", 1)[0]
    assert "$(PYTHON) python/infant_mortality/tools/install_env.py --venv $(VENV)" in rule
    assert "touch $(STAMP)" in rule


def test_heartbeat_never_leaves_a_silence_longer_than_its_period():
    lines: list[tuple[float, str]] = []
    started = time.monotonic()
    every = 0.3
    with Heartbeat(lambda text: lines.append((time.monotonic() - started, text)),
                   lambda silent: f"still working ({silent:.1f} s)", every=every) as beat:
        time.sleep(1.0)  # a silent child
        beat.output()
        time.sleep(0.1)  # output again: no status line is due
    times = [0.0, *(at for at, _ in lines)]
    assert len(lines) >= 2 and all(b - a < every + 0.3 for a, b in zip(times, times[1:]))
    assert all(text.startswith("still working") for _, text in lines)
    assert SILENCE < 5  # the promise: nothing silent for 5 s


def test_heartbeat_survives_a_failing_status_and_stays_off_when_quiet():
    lines: list[str] = []
    with Heartbeat(lines.append, lambda silent: 1 / 0, every=0.1):
        time.sleep(0.35)
    assert lines and all("still working" in line for line in lines)
    quiet: list[str] = []
    with Heartbeat(quiet.append, lambda silent: "x", every=0.1, enabled=False):
        time.sleep(0.3)
    assert quiet == []


def test_dbt_status_names_the_phase_and_how_far_the_nodes_are():
    now = [0.0]
    progress = DbtProgress(clock=lambda: now[0])
    assert "dbt is starting" in progress.status(4)
    progress.feed("00:11:27  Running with dbt=1.11.16")
    progress.feed("00:11:28  Unable to do partial parsing because saved manifest not found. Starting full parse.")
    now[0] = 8
    first, second = progress.status(4), progress.status(8)
    assert "parsing every model" in first and "8 s" in first and "partial_parse.msgpack" in first
    assert "partial_parse.msgpack" not in second  # the why is said once
    progress.feed("00:11:41  Found 71 models, 95 data tests, 10 seeds")
    assert "start hooks" in progress.status(4)
    progress.feed("\x1b[0m00:11:43  1 of 2 START hook: infant_mortality.on-run-start.0 ....... [RUN]")
    progress.feed("00:11:43  1 of 2 OK hook: infant_mortality.on-run-start.0 .......... [OK in 0.11s]")
    progress.feed("00:11:43  1 of 178 START sql table model marts.audit_input_files ......... [RUN]")
    progress.feed("00:11:43  6 of 178 START sql table model staging.stg_covariates__social_priority_index_2019  [RUN]")
    progress.feed("00:11:44  7 of 178 START test not_null_dim_commune_commune_code ........ [RUN]")
    progress.feed("00:11:45  1 of 178 OK created sql table model marts.audit_input_files .... [OK in 1.46s]")
    progress.feed("00:11:45  7 of 178 PASS not_null_dim_commune_commune_code .............. [PASS in 0.1s]")
    now[0] = 20
    status = progress.status(5)
    assert "2 of 178 done" in status
    assert "staging.stg_covariates__social_priority_index_2019 (12 s)" in status and "audit_input_files" not in status
    progress.feed("00:12:07  Finished running 10 seeds, 69 table models in 0 hours 0 minutes and 25.51 seconds")
    assert "run results" in progress.status(4)


def _install(tmp_path: Path, lock_lines: list[str], *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    lock = tmp_path / "requirements.lock"
    lock.write_text("".join(line + "\n" for line in lock_lines), encoding="utf-8")
    venv = tmp_path / ".venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run([sys.executable, str(INSTALLER), "--venv", str(venv), "--lock", str(lock), *args],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    return result, venv


def _imports_from_the_working_tree(venv: Path) -> str:
    code = "import infant_mortality, six; print(infant_mortality.__file__)"
    result = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                            cwd=venv.parent, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_installs_the_lock_with_uv_and_the_project_editable(tmp_path):
    """Needs the package index (PyPI), as `make` does on a fresh machine."""
    text = (REPO_ROOT / "requirements.lock").read_text(encoding="utf-8")
    result, venv = _install(tmp_path, [pinned(text, "uv"), pinned(text, "pip"), "six==1.17.0"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert [line[:5] for line in out.splitlines() if re.match(r"\[\d/5\]", line)] == [f"[{k}/5]" for k in range(1, 6)]
    assert re.search(r"^    \d+ modules imported", out, re.M)  # step 5 (dbt is not in this small lock: reported)
    assert "with uv " + pinned(text, "uv").split("==")[1] in out.splitlines()[-1]
    assert _imports_from_the_working_tree(venv) == str(REPO_ROOT / "python" / "infant_mortality" / "__init__.py")
    assert (venv / "bin" / "uv").exists() and (venv / "bin" / "pip").exists()  # both pinned in the lock
    assert f'export DBT_PROFILES_DIR="{REPO_ROOT / "profiles"}"' in (venv / "bin" / "activate").read_text()
    # Again, on the same venv (the lock changed, say): uv is reused, the lock synced again.
    again, _ = _install(tmp_path, [pinned(text, "uv"), pinned(text, "pip"), "six==1.17.0"])
    assert again.returncode == 0 and "Using uv" in again.stdout and "Reusing" in again.stdout
    assert (venv / "bin" / "activate").read_text().count("DBT_PROFILES_DIR=") == 1


def test_bytecode_step_leaves_no_cache_in_the_source_tree_when_asked_not_to(tmp_path, monkeypatch):
    """With PYTHONDONTWRITEBYTECODE set, step 5 writes caches into .venv only: those it wrote
    under python/ are removed, those that were there stay."""
    from infant_mortality.tools import install_env

    source = tmp_path / "project" / "python" / "pkg"
    (source / "__pycache__").mkdir(parents=True)
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "lock").write_text("uv==0.13.9\n")

    def fake_run(command, what, venv, expected, quiet, far=None, env=None, cwd=None):
        assert "PYTHONDONTWRITEBYTECODE" not in env and far().endswith("modules compiled")
        (source / "sub" / "__pycache__").mkdir(parents=True)  # what importing would have written
        return 0, ["12 modules imported"]

    monkeypatch.setattr(install_env, "PROJECT_DIR", tmp_path / "project")
    monkeypatch.setattr(install_env, "run", fake_run)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    install_env.Installer(venv, tmp_path / "lock", quiet=True).compile_bytecode(None)
    assert (source / "__pycache__").is_dir() and not (source / "sub" / "__pycache__").exists()


def test_falls_back_to_pip_saying_why_when_uv_cannot_be_installed(tmp_path):
    """A uv that no index has (as a platform without uv's wheel): pip installs the rest of the lock."""
    result, venv = _install(tmp_path, ["uv==0.0.0", "six==1.17.0"], "--quiet")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "uv could not be installed" in result.stdout and "Installing with pip instead" in result.stdout
    assert "with pip:" in result.stdout.splitlines()[-1]
    assert _imports_from_the_working_tree(venv).startswith(str(REPO_ROOT / "python"))
    assert not (venv / "bin" / "uv").exists()
