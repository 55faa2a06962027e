"""Cluster sources: which source takes a --cluster value (built-in order, a level's
sources placed ahead of the one they name), the error when none does, and modules that
import each other only one way."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from clustertune import catalog, sources, vcluster
from clustertune.cluster import Cluster, Host, Site, local_cluster
from clustertune.errors import ConfigError, UserError

BUILT_IN = ("localhost", "file", "vcluster")


@pytest.fixture(autouse=True)
def built_in_sources_only(monkeypatch):
    """The built-in sources alone: no level's manifest (the grid level declares its own)."""
    monkeypatch.setattr(catalog, "all_levels", lambda: ())


@pytest.fixture
def on_disk(tmp_path, monkeypatch):
    """Factory: a virtual cluster's state on disk, nothing built (a private run dir)."""
    monkeypatch.setattr(vcluster.state, "RUN_DIR", tmp_path / "run")

    def make(name: str, hosts: int = 2, **plan_args) -> None:
        state = vcluster.plan(name, hosts, None, **plan_args)
        state.update(status="up", agent="/run/agent")  # what up() adds once built
        vcluster.state_dir(name).mkdir(parents=True)
        (vcluster.state_dir(name) / "state.json").write_text(json.dumps(state))

    return make


class GridFile:
    """A source as a grid level would add one: claims values a later source also claims."""

    name = "grid"

    def claims(self, spec):
        return bool(spec) and spec.endswith(".grid.toml")

    def resolve(self, spec):
        return Cluster(spec, (Host("h"),), (Site("site0", "local"),))

    def not_found(self):
        return "no grid file"


def test_built_in_order():
    assert [s.name for s in sources.sources()] == ["localhost", "file", "vcluster"]


@pytest.mark.parametrize("spec", [None, ""])
def test_no_value_is_this_host(spec):
    cluster = sources.resolve_cluster(spec)
    assert cluster == local_cluster()
    assert cluster.launcher == "local"


def test_virtual_cluster_by_name(on_disk):
    on_disk("lab", hosts=4, sites=2, wan_bps=10**8)
    cluster = sources.resolve_cluster("lab")
    assert cluster.source == "vcluster:lab"
    assert [(s.name, s.launcher, s.wan_bps) for s in cluster.sites] == [
        ("site0", "vcluster", 10**8),
        ("site1", "vcluster", 10**8),
    ]


def test_a_file_comes_before_a_virtual_cluster_of_the_same_name(on_disk, tmp_path, monkeypatch):
    on_disk("lab")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab").write_text('name = "real"\n[[hosts]]\nname = "n1"\n')
    assert sources.resolve_cluster("lab").source == "lab"


def test_a_toml_path_is_a_file_even_when_missing(on_disk, tmp_path):
    with pytest.raises(UserError, match="absent.toml: cannot read cluster file"):
        sources.resolve_cluster(str(tmp_path / "absent.toml"))


def test_a_bad_file_names_file_line_and_field(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('launcher = "pbs"\n[[hosts]]\nname = "n1"\n')
    with pytest.raises(ConfigError, match=rf"^{path}:1: launcher: 'pbs' is not one of"):
        sources.resolve_cluster(str(path))


def test_unknown_name_lists_the_virtual_clusters(on_disk):
    on_disk("lab")
    on_disk("big")
    with pytest.raises(UserError) as info:
        sources.resolve_cluster("nosuch")
    assert str(info.value) == (
        "--cluster 'nosuch': no such cluster file and no virtual cluster of that name "
        "(virtual clusters: big, lab)"
    )


def test_unknown_name_without_root_says_why_none_is_up(on_disk, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match=r"\(virtual clusters: none is up; they need root"):
        sources.resolve_cluster("nosuch")


def test_a_level_source_goes_ahead_of_one_that_would_take_its_values(monkeypatch, tmp_path):
    level = SimpleNamespace(name="g", part={"cluster_sources": ((GridFile(), "file"),)}.get)
    monkeypatch.setattr(catalog, "all_levels", lambda: (level,))
    assert [s.name for s in sources.sources()] == ["localhost", "grid", "file", "vcluster"]
    assert sources.resolve_cluster("sites.grid.toml").name == "sites.grid.toml"
    with pytest.raises(UserError, match="cannot read cluster file"):
        sources.resolve_cluster(str(tmp_path / "plain.toml"))
    with pytest.raises(UserError, match="no grid file and no such cluster file and"):
        sources.resolve_cluster("nosuch")


@pytest.mark.parametrize(
    "module, absent",
    [
        (
            "clustertune.cluster",
            ["clustertune.vcluster", "clustertune.sources", "clustertune.launch.base"],
        ),
        ("clustertune.vcluster", ["clustertune.sources", "clustertune.launch.base"]),
        ("clustertune.launch.launchers", ["clustertune.sources"]),
    ],
)
def test_imports_run_one_way(module, absent):
    """The model imports no source and no launcher (only the MPI flavours, launch/mpi.py);
    sources import both, never the reverse."""
    code = f"import sys, {module}; print([m for m in {absent!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_grid_sources_do_not_depend_on_what_was_imported():
    """A fresh interpreter that imported nothing of the grid resolves --cluster with the grid
    level's sources (before d3e8301's fix and the manifests they existed only once
    clustertune.levels.grid had been imported: 12 order-dependent test failures)."""
    code = (
        "from clustertune import sources\n"
        "try:\n    sources.resolve_cluster('h1-nosuch')\n"
        "except Exception as exc:\n    print(exc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no virtual grid of that name" in done.stdout, done.stdout
    assert "no virtual cluster of that name" in done.stdout, done.stdout
