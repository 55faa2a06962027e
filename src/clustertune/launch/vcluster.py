"""Virtual cluster: mpirun started inside the first host, the namespace agent in place of ssh.

The root namespace has no route into the cluster, so the MPI launcher must itself run on
a virtual host; its hostfile lives in /tmp, which every namespace shares.
"""

from __future__ import annotations

from pathlib import Path

from .. import vcluster
from .base import Job
from .hostfile import HostfileLauncher

VIRTUAL_NIC = "eth0"


class VClusterLauncher(HostfileLauncher):
    name = "vcluster"
    interface = VIRTUAL_NIC
    binds_ranks = False  # every virtual host is this machine

    @property
    def agent(self) -> str:  # type: ignore[override]
        return self.cluster.extra["agent"]

    def contact(self, host: str) -> str:
        return self.cluster.host(host).name

    def on_head(self, job: Job, workdir: Path, argv: list[str]) -> list[str]:
        return self.host_argv(job.hosts_used(self.cluster)[0], argv)

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return vcluster.agent_argv(self.cluster, host, argv)
