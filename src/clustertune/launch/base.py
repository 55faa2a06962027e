"""The launcher interface: how a job's ranks get started on a cluster.

A launcher turns a :class:`Job` into one command line (``mpi_argv``) and can run a plain
program on one host (``host_argv``). What differs between the MPIs lives in their
flavours (:mod:`.mpi`), so each launcher only decides *where* ranks go and *how* remote
hosts are reached. :mod:`.launchers` finds a cluster's launcher by name.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from ..cluster import Cluster
from ..errors import UserError
from . import mpi, process
from .process import Completed
from .service import Service


@dataclass
class Job:
    kernel: Path  # absolute path of the kernel binary (same path on every host)
    args: list[str]
    np: int
    mpi: str  # a flavour's name (launch/mpi.py)
    hosts: list[str] | None = None  # hosts to place ranks on, round-robin; default all
    env: dict[str, str] = field(default_factory=dict)  # exported to every rank
    timeout: float = 600.0
    job_id: str = field(default_factory=process.new_job_id)  # marks every process of the job

    def placement(self, cluster: Cluster) -> list[str]:
        """Host of each rank: round-robin over the chosen hosts (one rank per host first)."""
        names = self.hosts or [h.name for h in cluster.hosts]
        for name in names:
            cluster.host(name)  # raises on an unknown host
        return [names[rank % len(names)] for rank in range(self.np)]

    def hosts_used(self, cluster: Cluster) -> list[str]:
        return list(dict.fromkeys(self.placement(cluster)))

    def ranks_per_host(self, cluster: Cluster) -> int:
        return math.ceil(self.np / len(self.hosts_used(cluster)))


class Launcher(ABC):
    name = ""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    @abstractmethod
    def mpi_argv(self, job: Job, workdir: Path) -> list[str]:
        """The command that starts all ranks of ``job``; ``workdir`` may hold hostfiles."""

    @abstractmethod
    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        """The command that runs plain ``argv`` on one host."""

    def launcher_env(self, job: Job) -> dict[str, str]:
        """Environment of the launcher process itself."""
        return mpi.flavour(job.mpi).launcher_env(job.env)

    def check_mpi(self, name: str) -> None:
        flavour = mpi.flavour(name)
        if name not in self.cluster.mpi:
            raise UserError(f"cluster {self.cluster.name!r} does not offer MPI {name!r}")
        if shutil.which(flavour.launcher) is None:
            raise UserError(f"{flavour.launcher} not found: {name} is not installed (make setup)")

    def run_mpi(self, job: Job) -> Completed:
        self.check_mpi(job.mpi)
        if job.np < 1:
            raise UserError(f"--np {job.np}: must be at least 1")
        with tempfile.TemporaryDirectory(prefix="clustertune-job-") as workdir:
            argv = self.mpi_argv(job, Path(workdir))
            return process.run(argv, job.timeout, self.launcher_env(job), workdir, job.job_id)

    def run_on_host(
        self, host: str, argv: list[str], timeout: float = 60.0, env: dict[str, str] | None = None
    ) -> Completed:
        self.cluster.host(host)
        return process.run(self.host_argv(host, argv), timeout, env)

    def service(self, host: str, argv: list[str], **options) -> Service:
        """A program beside a job on ``host`` (a server, a daemon); see launch.service."""
        return Service(self, host, argv, **options)
