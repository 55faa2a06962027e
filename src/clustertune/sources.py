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

A new source (a Slurm allocation, a grid of sites) lives beside what it reads, imports
:mod:`clustertune.cluster` for the model and never this module, and is registered at the
end of this module with ``register(GridFile(), before="file")``: ``before`` puts it ahead
of a source that would also claim its values (``*.grid.toml`` before any ``*.toml``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from . import vcluster
from .cluster import Cluster, load_cluster_file, local_cluster
from .errors import UserError
from .launch import launchers
from .launch.vcluster import VClusterLauncher


class ClusterSource(Protocol):
    name: str

    def claims(self, spec: str | None) -> bool: ...

    def resolve(self, spec: str | None) -> Cluster: ...

    def not_found(self) -> str: ...


SOURCES: list[ClusterSource] = []


def register(source: ClusterSource, before: str | None = None) -> None:
    """Add ``source`` at the end, or just ahead of the source named ``before``."""
    index = len(SOURCES) if before is None else [s.name for s in SOURCES].index(before)
    SOURCES.insert(index, source)


def resolve_cluster(spec: str | None) -> Cluster:
    """``--cluster`` value -> Cluster, from the first source that claims it."""
    for source in SOURCES:
        if source.claims(spec):
            return source.resolve(spec)
    raise UserError(
        f"--cluster {spec!r}: " + " and ".join(filter(None, (s.not_found() for s in SOURCES)))
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


register(ThisHost())
register(ClusterFile())
register(vcluster.Source())
