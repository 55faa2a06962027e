"""Where a cluster comes from: the registry of cluster sources behind ``--cluster``.

A source is an object with
  * ``name``: its key in the registry ("localhost", "file", "vcluster");
  * ``claims(spec) -> bool``: whether a ``--cluster`` value (None: none given) is for it;
  * ``resolve(spec) -> Cluster``: the cluster that value names;
  * ``not_found() -> str``: its part of the error when no source claims a value, naming
    what it would take and what it knows (the virtual clusters that are up); "" if none.

:func:`resolve_cluster` asks the sources in registry order and the first that claims the
value resolves it. Built in, in this order: this host (no value), a TOML cluster file (a
path ending ``.toml`` or an existing file), a virtual cluster (a name that ``vcluster up``
left on disk; its source is :class:`clustertune.vcluster.Source`, beside the state it reads).

A level adds sources with the ``cluster_sources`` part of its manifest (the grid: a
running virtual grid, a grid description file): pairs ``(source, before)``, ``before``
the built-in source it goes ahead of because that one would also claim its values
(``*.grid.toml`` before any ``*.toml``). The list is read from the manifests each time,
so what ``--cluster`` resolves to never depends on which modules were imported before.
A source lives beside what it reads, imports :mod:`clustertune.cluster` for the model
and never this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from . import catalog, vcluster
from .cluster import Cluster, load_cluster_file, local_cluster
from .errors import UserError
from .launch import launchers
from .launch.vcluster import VClusterLauncher


class ClusterSource(Protocol):
    name: str

    def claims(self, spec: str | None) -> bool: ...

    def resolve(self, spec: str | None) -> Cluster: ...

    def not_found(self) -> str: ...


def sources() -> list[ClusterSource]:
    """The built-in sources, each level's placed ahead of the one it names, in the
    levels' order."""
    found: list[ClusterSource] = list(BUILT_IN)
    for level in catalog.all_levels():
        for source, before in level.part("cluster_sources") or ():
            names = [s.name for s in found]
            if before is not None and before not in names:
                raise ValueError(
                    f"level {level.name}: source {source.name} before unknown {before!r}"
                )
            found.insert(len(found) if before is None else names.index(before), source)
    return found


def resolve_cluster(spec: str | None) -> Cluster:
    """``--cluster`` value -> Cluster, from the first source that claims it."""
    known = sources()
    for source in known:
        if source.claims(spec):
            return source.resolve(spec)
    raise UserError(
        f"--cluster {spec!r}: " + " and ".join(filter(None, (s.not_found() for s in known)))
    )


class ThisHost:
    """No ``--cluster``: this machine alone, ranks on localhost."""

    name = "localhost"

    def claims(self, spec: str | None) -> bool:
        return not spec

    def resolve(self, spec: str | None) -> Cluster:
        return local_cluster()

    def not_found(self) -> str:
        return ""


class ClusterFile:
    """A TOML cluster file: any path ending ``.toml`` (a missing one is then a file error,
    not an unknown cluster name) or any existing file."""

    name = "file"

    def claims(self, spec: str | None) -> bool:
        return bool(spec) and (Path(spec).suffix == ".toml" or Path(spec).is_file())

    def resolve(self, spec: str) -> Cluster:
        # The launcher registry is the one list of launcher names. A file cannot use the
        # virtual cluster's launcher: it needs the agent that only `vcluster up` writes.
        names = [n for n in launchers.names() if n != VClusterLauncher.name]
        return load_cluster_file(Path(spec), names)

    def not_found(self) -> str:
        return "no such cluster file"


BUILT_IN = (ThisHost(), ClusterFile(), vcluster.Source())
