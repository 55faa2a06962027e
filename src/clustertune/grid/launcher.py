"""The grid launcher: one MPI job across the sites of a virtual grid, through each
site's own access path. mpirun runs on the grid's origin host (the user's machine at the
first site); its remote agent reaches a host of a Slurm site with ``srun --jobid`` inside
that site's co-allocated allocation, a host of an ssh site with the grid's ssh key, a
host of a GRAM site as a GRAM job through its gatekeeper (grid/gram.py: the MPI daemon
is the job, its output streamed back), a host of a site without scheduler with the
vcluster agent. The whole launch is wrapped in
grid/coalloc.py (all sites granted or nothing started).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .. import vcluster
from ..launch.base import Job
from ..launch.hostfile import HostfileLauncher
from ..launch.vcluster import VIRTUAL_NIC
from . import slurm, virtual

START_BARRIER_S = 30.0


class GridLauncher(HostfileLauncher):
    name = "grid"
    interface = VIRTUAL_NIC
    binds_ranks = False  # the sites' hosts are this machine's namespaces

    @property
    def grid(self) -> dict:
        state = virtual.load(self.cluster.extra["grid"])
        if state is None:
            from ..errors import UserError

            raise UserError(f"grid {self.cluster.extra['grid']!r} is not up")
        return state

    def contact(self, host: str) -> str:
        return host

    def _site_of(self, grid: dict, host: str) -> dict:
        return next(s for s in grid["sites"] if any(h["name"] == host for h in s["hosts"]))

    def _remote(self, grid: dict, host: str, workdir: Path | None) -> str:
        """Shell words that run "$@"-style arguments on ``host`` (for the agent script)."""
        site = self._site_of(grid, host)
        if site["scheduler"] == "slurm":
            head = next(h for h in site["hosts"] if h["name"] == site["head"])
            jobid = f"--jobid=$(cat {workdir}/alloc.{site['name']})" if workdir else ""
            srun = [
                "ip",
                "netns",
                "exec",
                head["namespace"],
                "env",
                f"SLURM_CONF={slurm.conf_path(site)}",
                "srun",
            ]
            return (
                f"{shlex.join(srun)} {jobid} --overlap --nodes=1 --ntasks=1 "
                f'--nodelist={host} --kill-on-bad-exit=1 sh -c "$*"'
            )
        if site["scheduler"] == "ssh":
            return f'{shlex.quote(str(Path(grid["dir"]) / "ssh" / "ssh"))} {host} "$*"'
        if site["scheduler"] == "gram":
            gram = [
                sys.executable,
                "-m",
                "clustertune.grid.gramrun",
                grid["name"],
                site["name"],
                host,
            ]
            return f'{shlex.join(gram)} "$*"'
        return f'{shlex.quote(self.cluster.extra["agent"])} {host} "$*"'

    def write_agent(self, grid: dict, hosts: list[str], workdir: Path) -> Path:
        cases = "\n".join(
            f"  {h})\n    shift; exec {self._remote(grid, h, workdir)} ;;" for h in hosts
        )
        agent = workdir / "grid-agent"
        agent.write_text(
            "#!/bin/sh\n# clustertune grid: the MPI launcher's remote shell, per site\n"
            'while [ $# -gt 0 ]; do case "$1" in -x|-n|-T|-q) shift ;; -o|-p|-l) shift 2 ;;'
            " *) break ;; esac; done\n"
            f'case "$1" in\n{cases}\n'
            '  *) echo "grid agent: unknown host $1" >&2; exit 255 ;;\nesac\n'
        )
        agent.chmod(0o755)
        return agent

    def remote_agent(self, job: Job, workdir: Path) -> str:
        return str(self.write_agent(self.grid, job.hosts_used(self.cluster), workdir))

    def on_head(self, job: Job, workdir: Path, argv: list[str]) -> list[str]:
        """The MPI launcher on the grid's origin host, inside a co-allocation of every
        site the job uses."""
        grid = self.grid
        hosts = job.hosts_used(self.cluster)
        mpirun = vcluster.agent_argv(self.cluster, grid["origin"], argv)
        wanted: dict[str, list[str]] = {}
        for h in hosts:
            wanted.setdefault(self._site_of(grid, h)["name"], []).append(h)
        minutes = max(1, int(job.timeout // 60) + 1)
        coalloc = [
            sys.executable,
            "-m",
            "clustertune.grid.coalloc",
            "--grid",
            grid["name"],
            "--workdir",
            str(workdir),
            "--barrier",
            str(START_BARRIER_S),
            "--minutes",
            str(minutes),
        ]
        for site, site_hosts in wanted.items():
            coalloc += ["--sites", f"{site}={','.join(site_hosts)}"]
        return coalloc + ["--", *mpirun]

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        """A plain program on one host, through its site's access path (a Slurm site: a
        one-task job of its own)."""
        grid = self.grid
        site = self._site_of(grid, host)
        if site["scheduler"] == "slurm":
            return slurm.client(
                site, ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={host}", *argv]
            )
        if site["scheduler"] == "ssh":
            origin_ns = self.cluster.host(grid["origin"]).namespace
            return [
                "ip",
                "netns",
                "exec",
                origin_ns,
                str(Path(grid["dir"]) / "ssh" / "ssh"),
                host,
                shlex.join(argv),
            ]
        return vcluster.agent_argv(self.cluster, host, argv)
