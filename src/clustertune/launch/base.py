"""The launcher interface: how a job's ranks get started on a cluster.

A launcher turns a :class:`Job` into one command line (``mpi_argv``) and can run a plain
program on one host (``host_argv``). The MPI-specific flags live in :mod:`.mpi_flags`,
so each launcher only decides *where* ranks go and *how* remote hosts are reached.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..cluster import MPI_FLAVOURS, Cluster
from ..errors import UserError
from . import process
from .process import Completed
from .service import Service

MPI_LAUNCHERS = dict(zip(MPI_FLAVOURS, ("mpirun.openmpi", "mpiexec.mpich"), strict=True))


@dataclass
class Job:
    kernel: Path  # absolute path of the kernel binary (same path on every host)
    args: list[str]
    np: int
    mpi: str  # "openmpi" or "mpich"
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
        env = dict(job.env)
        if job.mpi == "openmpi" and os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        return env

    def check_mpi(self, mpi: str) -> None:
        if mpi not in MPI_LAUNCHERS:
            raise UserError(f"unknown MPI {mpi!r} (known: {', '.join(MPI_LAUNCHERS)})")
        if mpi not in self.cluster.mpi:
            raise UserError(f"cluster {self.cluster.name!r} does not offer MPI {mpi!r}")
        if shutil.which(MPI_LAUNCHERS[mpi]) is None:
            raise UserError(f"{MPI_LAUNCHERS[mpi]} not found: {mpi} is not installed (make setup)")

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


_REGISTRY: dict[str, type[Launcher]] = {}


def names() -> list[str]:
    """Every launcher there is: the one list of launcher names."""
    return sorted(_REGISTRY)


def register(cls: type[Launcher]) -> type[Launcher]:
    _REGISTRY[cls.name] = cls
    return cls


def launcher_for(cluster: Cluster, site: str | None = None) -> Launcher:
    """The launcher of the whole cluster (its sites must share one), or of one site; a
    site's launcher sees only that site's hosts, so its jobs stay inside the site."""
    if site is not None:
        only = cluster.site(site)
        hosts = tuple(h for h in cluster.hosts if h.site == site)
        cluster = replace(cluster, hosts=hosts, sites=(only,))
    try:
        return _REGISTRY[cluster.launcher](cluster)
    except KeyError:
        raise UserError(
            f"cluster {cluster.name!r}: unknown launcher {cluster.launcher!r}"
        ) from None
