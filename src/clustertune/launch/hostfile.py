"""Real clusters over ssh: mpirun on this machine with a hostfile, hosts by address."""

from __future__ import annotations

import shlex
from pathlib import Path

from . import mpi_flags
from .base import Job, Launcher, register


@register
class HostfileLauncher(Launcher):
    name = "hostfile"
    agent: str | None = None  # None: the MPI's default remote shell (ssh)
    interface: str | None = None
    binds_ranks = True  # False where the hosts share one machine's cores (mpi_flags)

    def contact(self, host: str) -> str:
        """How the MPI launcher names a host in its hostfile."""
        return self.cluster.host(host).address or host

    def mpi_argv(self, job: Job, workdir: Path) -> list[str]:
        hosts = [self.contact(h) for h in job.hosts_used(self.cluster)]
        hostfile = workdir / f"hostfile.{job.mpi}"
        if job.mpi == "openmpi":
            hostfile.write_text(mpi_flags.openmpi_hostfile(hosts, job.ranks_per_host(self.cluster)))
            head = mpi_flags.openmpi(
                job.np, job.env, hostfile, self.agent, self.interface, self.binds_ranks
            )
        else:
            hostfile.write_text(mpi_flags.mpich_hostfile(hosts))
            head = mpi_flags.mpich(job.np, job.env, hostfile, self.agent, self.interface)
        return self.on_head(job, head + [str(job.kernel), *job.args])

    def on_head(self, job: Job, argv: list[str]) -> list[str]:
        """Where the MPI launcher itself runs: here, on this machine."""
        return argv

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return ["ssh", "-o", "BatchMode=yes", self.contact(host), shlex.join(argv)]
