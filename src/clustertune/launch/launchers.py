"""A cluster's launcher, by the name its sites give (``launcher = "..."`` in a cluster
file): the built-in launchers listed here, and those the levels' manifests name (their
``launchers`` part: the grid's). The one list of launcher names."""

from __future__ import annotations

from dataclasses import replace

from .. import catalog
from ..cluster import Cluster
from ..errors import UserError
from .base import Launcher
from .hostfile import HostfileLauncher
from .local import LocalLauncher
from .slurm import SlurmLauncher
from .vcluster import VClusterLauncher

BUILT_IN = (LocalLauncher, HostfileLauncher, SlurmLauncher, VClusterLauncher)


def _by_name() -> dict[str, type[Launcher]]:
    found = {cls.name: cls for cls in BUILT_IN}
    for level in catalog.all_levels():
        for cls in level.part("launchers") or ():
            found[cls.name] = cls
    return found


def names() -> list[str]:
    """Every launcher there is."""
    return sorted(_by_name())


def launcher_for(cluster: Cluster, site: str | None = None) -> Launcher:
    """The launcher of the whole cluster (its sites must share one), or of one site; a
    site's launcher sees only that site's hosts, so its jobs stay inside the site."""
    if site is not None:
        only = cluster.site(site)
        hosts = tuple(h for h in cluster.hosts if h.site == site)
        cluster = replace(cluster, hosts=hosts, sites=(only,))
    try:
        return _by_name()[cluster.launcher](cluster)
    except KeyError:
        raise UserError(
            f"cluster {cluster.name!r}: unknown launcher {cluster.launcher!r}"
        ) from None
