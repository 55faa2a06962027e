"""Real clusters over ssh: mpirun on this machine with a hostfile, hosts by address.

The virtual cluster's, the grid's launchers and the grid's job back-ends start their MPI
the same way (:meth:`HostfileLauncher.mpi_command`), each with its own remote agent and
place for the MPI launcher itself.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from .. import kernels
from . import mpi
from .base import Job, Launcher


class HostfileLauncher(Launcher):
    name = "hostfile"
    agent: str | None = None  # None: the MPI's default remote shell (ssh)
    interface: str | None = None
    binds_ranks = True  # False where the hosts share one machine's cores (launch/mpi.py)

    def contact(self, host: str) -> str:
        """How the MPI launcher names a host in its hostfile."""
        return self.cluster.host(host).address or host

    def remote_agent(self, job: Job, workdir: Path) -> str | None:
        """The MPI launcher's remote shell for ``job`` (may write it into ``workdir``)."""
        return self.agent

    def mpi_command(self, job: Job, workdir: Path) -> list[str]:
        """The MPI launcher's command line up to the program, over the job's hosts; its
        hostfile is written into ``workdir``."""
        flavour = mpi.flavour(job.mpi)
        hosts = [self.contact(h) for h in job.hosts_used(self.cluster)]
        hostfile = workdir / f"hostfile.{flavour.name}"
        hostfile.write_text(flavour.hostfile(hosts, job.ranks_per_host(self.cluster)))
        return flavour.argv(
            job.np,
            job.env,
            hostfile=hostfile,
            agent=self.remote_agent(job, workdir),
            interface=self.interface,
            bind=self.binds_ranks,
            locate=kernels.kernel_path,
            spans_hosts=len(set(hosts)) > 1,
        )

    def mpi_argv(self, job: Job, workdir: Path) -> list[str]:
        argv = self.mpi_command(job, workdir) + [str(job.kernel), *job.args]
        return self.on_head(job, workdir, argv)

    def on_head(self, job: Job, workdir: Path, argv: list[str]) -> list[str]:
        """Where the MPI launcher itself runs: here, on this machine."""
        return argv

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return ["ssh", "-o", "BatchMode=yes", self.contact(host), shlex.join(argv)]
