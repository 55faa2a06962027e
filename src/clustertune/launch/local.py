"""Ranks on this machine: mpirun without a hostfile."""

from __future__ import annotations

from pathlib import Path

from . import mpi
from .base import Job, Launcher


class LocalLauncher(Launcher):
    name = "local"

    def mpi_argv(self, job: Job, workdir: Path) -> list[str]:
        return mpi.flavour(job.mpi).argv(job.np, job.env) + [str(job.kernel), *job.args]

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return list(argv)
