"""The levels of clustertune and the manifest each declares.

A **level** is the unit a user measures, stores and reads back together: one entry in
the ``level`` field of every record it makes, one section of the report, one step of
``make demo``, its own commands and its own kernels. A level may cover more than one of
the papers' levels when its figures compare them: ``network`` holds the raw TCP level and
the message-passing level (MPI, PVM) because the MPI overhead is read against TCP on the
same pair (``params.layer`` tells them apart). Conversely the papers' "application level"
is several levels here (``linpack``, then ``npb``, ``qcd``), each with its own kernels.

A level is a package ``clustertune/levels/<name>/`` whose ``__init__.py`` is its manifest:
one ``LEVEL = Level(...)`` naming its parts as ``"module:attribute"`` strings relative to
the package. The manifest imports none of its parts; a part is imported when a reader asks
for it with :meth:`Level.part`, so reading every manifest is cheap and has no side effect::

    LEVEL = Level(
        name="npb",
        title="NAS Parallel Benchmarks",
        after="linpack",                    # its place in the report and the demo
        kernels=(Kernel("ct-npb-ep", "npb/ep"),),
        commands="cli:add_commands",        # add_commands(subparsers, common) -> None
        section="section:render",           # render(records) -> HTML fragment
        summary="summary:rows",             # rows(records) -> [clustertune.summary.Row]
        demo="demo:step",                   # step(cluster, store) -> records
        study_kinds="steps:KINDS",          # (clustertune.studies.kinds.Kind, ...)
        cluster_sources="sources:SOURCES",  # ((source, before), ...): see clustertune.sources
        launchers="launchers:LAUNCHERS",    # (Launcher class, ...): see clustertune.launch
    )

:mod:`clustertune.catalog` finds the manifests and orders them; the readers (the CLI, the
report and its first screen, the demo, the cluster sources, the studies, the kernel finder
and the build) ask each level for the part they need. None of them names a level.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from ..launch import mpi

SERIAL = "serial"
FLAVOURS = (*mpi.NAMES, SERIAL)  # the build trees: one per MPI, one without

# where `make demo` writes what it makes: the report, the study pages, the tuned HPL.dat
DEMO_DIR = Path("out")

# The parts a manifest may name, and what each resolves to (docs/architecture.md).
PARTS = ("commands", "section", "summary", "demo", "study_kinds", "cluster_sources", "launchers")


@dataclass(frozen=True)
class Kernel:
    name: str  # the built file's name, e.g. ct-linpack or libct_finalize_shim.so
    directory: str  # its source directory under kernels/
    flavours: tuple[str, ...] = mpi.NAMES  # the build trees it is built in

    @property
    def is_library(self) -> bool:
        return self.name.endswith(".so")


@dataclass(frozen=True)
class Level:
    name: str  # the records' "level" field; also the report section's anchor
    title: str  # heading of the report section
    # the level this one's section and demo step come after ("": the first); levels sort
    # by the length of that chain, then by name (clustertune.catalog.ordered)
    after: str
    kernels: tuple[Kernel, ...] = ()
    # parts: "module:attribute" in this level's package, imported by part() when asked for
    commands: str | None = None
    section: str | None = None
    summary: str | None = None
    demo: str | None = None
    study_kinds: str | None = None
    cluster_sources: str | None = None
    launchers: str | None = None  # (Launcher class, ...): see clustertune.launch.launchers
    package: str = ""  # set by clustertune.catalog: the package the part strings are in

    def part(self, name: str):
        """The object the manifest names for part ``name`` (imported now), or None if the
        level has no such part."""
        if name not in PARTS:
            raise ValueError(f"unknown level part {name!r} (known: {', '.join(PARTS)})")
        spec = getattr(self, name)
        if spec is None:
            return None
        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(f"{self.package}.{module}"), attr)


__all__ = ["DEMO_DIR", "FLAVOURS", "PARTS", "SERIAL", "Kernel", "Level"]
