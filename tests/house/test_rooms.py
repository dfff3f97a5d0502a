"""The layout of models/ as CONTRIBUTING.md describes it, read from dbt's own manifest.

Rooms are folders by domain; what stands at the top of a room is public (marts), its
intermediate/ folder is private to its dbt group. dbt refuses a ref to a private model from
another group; these tests keep the configuration that makes it so from drifting (a folder
without its tag or group, an intermediate model made public by accident, a mart without a
contract).
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import pytest
import yaml

from conftest import REPO_ROOT

ROOMS = tuple(group["name"] for group in yaml.safe_load((REPO_ROOT / "models" / "_groups.yml").read_text())["groups"])
# Models other rooms may read although they are intermediate: the input modes' ports and each
# room's audit port, which the audit room unions.
PORT_PREFIXES = ("int_input__", "int_audit__")


@pytest.fixture(scope="module")
def models(bundled_warehouse):
    manifest = json.loads((bundled_warehouse.parent / "dbt_target" / "manifest.json").read_text())
    nodes = {k: n for k, n in manifest["nodes"].items() if n["resource_type"] == "model"}
    assert len(nodes) > 40
    return nodes, manifest


def _room(node) -> str:
    return PurePosixPath(node["original_file_path"]).parts[1]


def _is_intermediate(node) -> bool:
    return node["name"].startswith(("int_", "stg_"))


def test_every_model_lives_in_a_room_with_its_tag_and_group(models):
    nodes, _ = models
    misplaced = [(n["original_file_path"], n["tags"], n["group"]) for n in nodes.values()
                 if _room(n) not in ROOMS or _room(n) not in n["tags"] or n["group"] != _room(n)]
    assert misplaced == []


def test_intermediate_models_are_private_unless_core_or_a_port(models):
    nodes, _ = models
    public = [n["name"] for n in nodes.values()
              if n["name"].startswith("int_") and n["access"] != "private"
              and _room(n) != "core" and not n["name"].startswith(PORT_PREFIXES)]
    assert public == []
    # ...and what is public at the top of a room is a mart, never an intermediate model.
    top_level_intermediate = [n["original_file_path"] for n in nodes.values()
                              if n["name"].startswith("int_") and len(PurePosixPath(n["original_file_path"]).parts) == 3]
    assert top_level_intermediate == []


def test_no_room_reads_another_rooms_intermediate_models_except_core_and_ports(models):
    nodes, _ = models
    crossings = []
    for node in nodes.values():
        for parent_id in node["depends_on"]["nodes"]:
            parent = nodes.get(parent_id)
            if parent is None or not parent["name"].startswith("int_"):
                continue
            if _room(parent) not in (_room(node), "core") and not parent["name"].startswith(PORT_PREFIXES):
                crossings.append(f"{node['name']} ({_room(node)}) -> {parent['name']} ({_room(parent)})")
    assert crossings == []


def test_the_schema_follows_the_layer_prefix(models):
    nodes, _ = models
    expected = {"stg_": "staging", "int_": "intermediate"}
    wrong = [(n["name"], n["schema"]) for n in nodes.values()
             if n["schema"] != expected.get(n["name"][:4], "marts")]
    assert wrong == []


def test_every_sql_mart_has_an_enforced_contract_and_described_columns(models):
    nodes, _ = models
    marts = [n for n in nodes.values() if not _is_intermediate(n)]
    assert {"fct_trends", "fct_area_year_rates", "audit_data_quality", "meta_build"} <= {n["name"] for n in marts}
    no_contract = [n["name"] for n in marts if n["language"] == "sql" and not n["contract"]["enforced"]]
    undescribed = [f"{n['name']}.{c}" for n in marts for c, col in n["columns"].items() if not col["description"].strip()]
    assert no_contract == [] and undescribed == []


def test_exposures_name_marts_only(models):
    nodes, manifest = models
    exposures = manifest["exposures"].values()
    assert {e["name"] for e in exposures} >= {"report", "geopackage", "superset_dashboard"}
    not_marts = [(e["name"], p) for e in exposures for p in e["depends_on"]["nodes"]
                 if p not in nodes or _is_intermediate(nodes[p])]
    assert not_marts == []


def _room_order() -> list[str]:
    """The rooms in the order data flows: the order of the groups in models/_groups.yml."""
    import yaml

    from conftest import REPO_ROOT

    groups = yaml.safe_load((REPO_ROOT / "models" / "_groups.yml").read_text(encoding="utf-8"))["groups"]
    return [g["name"] for g in groups]


# Edges allowed to run from a later room to an earlier one: none. The rooms that read every other
# room, audit (the union of the audit ports, int_audit__<room>) and meta (how the file was built),
# stand last in the order, so their edges run forward like all others.
BACKWARD_EXCEPTIONS: set[tuple[str, str]] = set()


def test_no_edge_runs_from_a_later_room_to_an_earlier_one(models):
    nodes, manifest = models
    order = _room_order()
    assert set(order) == set(ROOMS) and order[-2:] == ["audit", "meta"]
    # The models of the input mode left out of this build, by name, so that their edges are checked too.
    every = {n["name"]: n for lst in manifest.get("disabled", {}).values() for n in lst
             if n.get("resource_type") == "model"}
    every.update({n["name"]: n for n in nodes.values()})
    backward = []
    for node in every.values():
        parents = [nodes[p]["name"] for p in node["depends_on"]["nodes"] if p in nodes]
        parents += [r["name"] for r in node.get("refs", [])]
        for name in set(parents):
            parent = every.get(name)
            if parent is None or (node["name"], name) in BACKWARD_EXCEPTIONS:
                continue
            if order.index(_room(parent)) > order.index(_room(node)):
                backward.append(f"{node['name']} ({_room(node)}) -> {name} ({_room(parent)})")
    assert backward == []
