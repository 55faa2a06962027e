"""Shared fixtures: a private results store, and virtual clusters that always come down."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from clustertune import hostinfo, netns, vcluster
from clustertune.results import Store


def pytest_collection_modifyitems(config, items):
    """Tests marked ``root`` (network namespaces) are skipped without root."""
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "results.db")
    yield s
    s.close()


@pytest.fixture(autouse=True)
def private_db(tmp_path, monkeypatch):
    """No test writes to the user's real results database."""
    monkeypatch.setenv("CLUSTERTUNE_DB", str(tmp_path / "cli-results.db"))


@pytest.fixture(autouse=True, scope="session")
def private_blas_cache(tmp_path_factory):
    """No test writes the user's measured BLAS choice: the suite gets its own cache,
    seeded with the user's choices (so a host measured once is not measured again)."""
    user_choices = hostinfo.blas_cache_dir() / "blas-choice.json"
    cache = tmp_path_factory.mktemp("blas-cache")
    if user_choices.is_file():
        shutil.copy(user_choices, cache / user_choices.name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(hostinfo.BLAS_CACHE_ENV, str(cache))
        yield cache


def run_test_without_build(test: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """One test run by a pytest of its own whose kernels' build directory is empty: a
    missing build must fail that test (an error), never turn it into a skip."""
    env = os.environ | {"CLUSTERTUNE_BUILD_DIR": str(tmp_path / "no-build")}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [*argv, test], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 1 and "1 error" in out.stdout and "skipped" not in out.stdout, out
    return out


def unique_name(stem: str) -> str:
    return f"{stem}{uuid.uuid4().hex[:6]}"[:12]


@pytest.fixture
def make_vcluster():
    """Factory: build a virtual cluster; every one built is removed at teardown."""
    built: list[str] = []

    def make(hosts: int = 2, link_bps: int | None = None, **kwargs):
        name = unique_name("t")
        built.append(name)
        state = vcluster.up(vcluster.plan(name, hosts, link_bps, **kwargs))
        return vcluster.cluster_from_state(state)

    yield make
    for name in built:
        vcluster.down(name)
        leftovers = [ns for ns in netns.listed() if ns.startswith(vcluster.prefix(name))]
        assert not leftovers, f"namespaces left behind: {leftovers}"
