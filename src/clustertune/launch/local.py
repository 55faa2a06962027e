"""Ranks on this machine: mpirun without a hostfile."""

from __future__ import annotations

from pathlib import Path

from . import mpi_flags
from .base import Job, Launcher, register


@register
class LocalLauncher(Launcher):
    name = "local"

    def mpi_argv(self, job: Job, workdir: Path) -> list[str]:
        if job.mpi == "openmpi":
            head = mpi_flags.openmpi(job.np, job.env)
        else:
            head = mpi_flags.mpich(job.np, job.env)
        return head + [str(job.kernel), *job.args]

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return list(argv)
