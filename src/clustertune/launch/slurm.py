"""Inside a Slurm allocation: srun starts the ranks through the MPI's PMI plug-in."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from . import mpi
from .base import Job, Launcher


def srun(*options: str) -> list[str]:
    """srun with ``options``; a task that fails ends the whole step."""
    return ["srun", "--kill-on-bad-exit=1", *options]


def tasks(np: int, hosts: Sequence[str] | None, flavour: mpi.Flavour | None) -> list[str]:
    """srun's options for ``np`` tasks round-robin (over ``hosts`` when given, else where
    Slurm places them), started as the ranks of ``flavour`` (None: plain copies). The
    grid's Slurm back-end runs the same inside its batch job."""
    options = ["--ntasks", str(np), "--distribution", "cyclic"]
    if hosts:
        options += ["--nodelist", ",".join(hosts)]
    return options + (flavour.srun_flags() if flavour else [])


class SlurmLauncher(Launcher):
    name = "slurm"

    def partition(self, host: str) -> list[str]:
        """srun's settings (partition) of ``host``'s site."""
        settings = self.cluster.site(self.cluster.host(host).site).settings
        return ["--partition", str(settings["partition"])] if "partition" in settings else []

    def check_mpi(self, name: str) -> None:  # srun replaces mpirun: only the MPI must be known
        mpi.flavour(name)

    def mpi_argv(self, job: Job, workdir: Path) -> list[str]:
        hosts = job.hosts_used(self.cluster)
        return srun(
            *self.partition(hosts[0]),
            *tasks(job.np, hosts, mpi.flavour(job.mpi)),
            "--export",
            ",".join(["ALL", *sorted(job.env)]),
            str(job.kernel),
            *job.args,
        )

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return srun(
            *self.partition(host), "--nodes", "1", "--ntasks", "1", "--nodelist", host, *argv
        )
