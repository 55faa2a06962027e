"""Launchers behind one interface: local, vcluster, hostfile (ssh), slurm."""

from . import hostfile, local, slurm, vcluster  # noqa: F401  (each registers itself)
from .base import Job, Launcher, launcher_for
from .process import Completed

__all__ = ["Completed", "Job", "Launcher", "launcher_for"]
