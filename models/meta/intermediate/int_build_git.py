"""The git commit the warehouse was built from (for marts.meta_build).

A dbt Python model because Jinja and SQL cannot run git. dbt runs from the repository root
(profiles/profiles.yml), so the working directory is the checkout. The rules (no checkout, a
working tree with uncommitted changes) are in infant_mortality.dbt_plugins.git_state.
"""

from infant_mortality.dbt_plugins.git_state import git_state


def model(dbt, session):
    dbt.config(materialized="table")
    commit, note = git_state()
    return session.sql("select cast($commit as varchar) as git_commit, cast($note as varchar) as git_note",
                       params={"commit": commit, "note": note})
