"""infant_mortality.dbt_plugins.git_state: the commit marts.meta_build records, on throwaway
repositories (the whole-build check against this checkout is in test_meta_build.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from infant_mortality.dbt_plugins.git_state import NOT_A_CHECKOUT, UNCOMMITTED, git_state

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": os.devnull}


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "--quiet")
    (tmp_path / "model.sql").write_text("select 1\n")
    _git(tmp_path, "add", "model.sql")
    _git(tmp_path, "commit", "--quiet", "-m", "first")
    return tmp_path


def test_a_clean_checkout_records_head_and_no_note(repo):
    assert git_state(repo) == (_git(repo, "rev-parse", "HEAD"), None)


def test_a_changed_tracked_file_is_noted_staged_or_not(repo):
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "model.sql").write_text("select 2\n")
    assert git_state(repo) == (head, UNCOMMITTED)
    _git(repo, "add", "model.sql")
    assert git_state(repo) == (head, UNCOMMITTED)
    _git(repo, "commit", "--quiet", "-m", "second")
    assert git_state(repo) == (_git(repo, "rev-parse", "HEAD"), None)


def test_an_untracked_file_is_not_a_change_of_the_build(repo):
    (repo / "notes.txt").write_text("scratch\n")
    assert git_state(repo)[1] is None


def test_outside_a_checkout_there_is_no_commit(tmp_path):
    assert git_state(tmp_path) == (None, NOT_A_CHECKOUT)
