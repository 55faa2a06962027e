"""Inside a Slurm allocation: srun starts the ranks through the MPI's PMI plug-in."""

from __future__ import annotations

from pathlib import Path

from .base import Job, Launcher, register

# Debian's OpenMPI is built with PMIx, its MPICH (hydra/ch4) speaks PMI-2 under srun.
PMI_PLUGIN = {"openmpi": "pmix", "mpich": "pmi2"}


@register
class SlurmLauncher(Launcher):
    name = "slurm"

    def srun(self, host: str) -> list[str]:
        """srun with the settings (partition) of ``host``'s site."""
        argv = ["srun", "--kill-on-bad-exit=1"]
        settings = self.cluster.site(self.cluster.host(host).site).settings
        if "partition" in settings:
            argv += ["--partition", str(settings["partition"])]
        return argv

    def check_mpi(self, mpi: str) -> None:  # srun replaces mpirun: only the MPI must be known
        if mpi not in PMI_PLUGIN:
            super().check_mpi(mpi)

    def mpi_argv(self, job: Job, workdir: Path) -> list[str]:
        hosts = job.hosts_used(self.cluster)
        return self.srun(hosts[0]) + [
            f"--mpi={PMI_PLUGIN[job.mpi]}",
            "--ntasks",
            str(job.np),
            "--nodelist",
            ",".join(hosts),
            "--distribution",
            "cyclic",
            "--export",
            ",".join(["ALL", *sorted(job.env)]),
            str(job.kernel),
            *job.args,
        ]

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return self.srun(host) + ["--nodes", "1", "--ntasks", "1", "--nodelist", host, *argv]
