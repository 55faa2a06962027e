"""Level manifests (clustertune.levels, clustertune.catalog): every level found under
levels/ without a central list, in the order the manifests declare, each part imported
only when asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clustertune import catalog, kernels
from clustertune.levels import PARTS, Kernel, Level

# the report's and the demo's order before the manifests (order=0..95), kept by after=
ORDER_BEFORE = ["hosts", "probe", "network", "linpack", "npb", "qcd", "io", "grid", "tune", "study"]


def test_the_levels_keep_their_order():
    names = [level.name for level in catalog.all_levels()]
    assert [n for n in names if n in ORDER_BEFORE] == ORDER_BEFORE


def test_every_part_a_manifest_names_exists():
    """A part string with a typo fails here, not when a user reaches that command."""
    for level in catalog.all_levels():
        for part in PARTS:
            if getattr(level, part) is not None:
                assert level.part(part) is not None, f"{level.name}: {part}"


def test_reading_the_manifests_imports_no_part():
    """Discovery is cheap and has no side effect: the manifests are read, the parts
    (commands, sections, demo steps...) are imported by whoever asks for them."""
    code = (
        "import sys\n"
        "from clustertune import catalog, kernels\n"
        "catalog.all_levels(); kernels.declared()\n"
        "print(sorted(m for m in sys.modules if m.startswith('clustertune.levels.')"
        " and m.count('.') > 2))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_part_is_none_when_not_declared_and_an_unknown_part_is_an_error():
    study = catalog.level("study")
    assert study.part("section") is None and callable(study.part("commands"))
    with pytest.raises(ValueError, match="unknown level part 'sections'"):
        study.part("sections")


def _level(name: str, after: str) -> Level:
    return Level(name, name.title(), after)


def test_after_places_a_level_and_ties_go_by_name():
    got = catalog.ordered(
        [
            _level("b", "a"),
            _level("stream", "linpack"),
            _level("linpack", "b"),
            _level("a", ""),
            _level("npb", "linpack"),
            _level("qcd", "npb"),
        ]
    )
    assert [lv.name for lv in got] == ["a", "b", "linpack", "npb", "stream", "qcd"]


@pytest.mark.parametrize(
    "levels, error",
    [
        ([_level("a", ""), _level("b", "nosuch")], "level 'b': after='nosuch' names no level"),
        ([_level("a", ""), _level("b", "c"), _level("c", "b")], "in a circle"),
        ([_level("a", ""), _level("b", "")], "levels a, b all have after='': one level is first"),
    ],
)
def test_a_misplaced_level_is_an_error(levels, error):
    with pytest.raises(ValueError, match=error):
        catalog.ordered(levels)


def test_kernels_are_declared_by_the_manifests_and_checked():
    names = {k.name for k in kernels.declared()}
    assert {"ct-probe", "ct-linpack", "ct-io-netcdf", "ct-nfq-delay"} <= names
    assert kernels.kernel_path("ct-probe", "openmpi").name == "ct-probe"


def test_a_kernel_declared_twice_differently_is_an_error(monkeypatch):
    twice = (Kernel("ct-probe", "probe", ("mpich",)),)
    monkeypatch.setattr(catalog, "kernels", lambda: [*twice, Kernel("ct-probe", "probe")])
    with pytest.raises(ValueError, match="kernel ct-probe declared twice, differently"):
        kernels.declared()
