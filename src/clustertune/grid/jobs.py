"""One submission interface over the sites' backends (GRAM's role in seeds/000).

A :class:`GridJob` holds the RSL attributes the seed uses: ``executable``, ``arguments``,
``count``, ``environment``, ``directory``, ``jobtype`` (``single``: count copies;
``mpi``: one MPI job of count ranks). A backend submits it to one site and returns a
:class:`Handle`; ``poll`` gives its state (pending, active, done, failed), ``cancel``
stops it, ``result`` fetches exit status and output back. Every job writes its own exit
status into its directory (GRAM never returns one: read it from the job's own output).

The back-ends are schedulers over the launchers (launch/): each keeps only its own way
of submitting (sbatch, a background shell, a GRAM request) and builds the MPI part of a
job as the launchers do, from the MPI's flavour (launch/mpi.py).

Backends: ``slurm`` (sbatch on the site's head, srun with the MPI's PMI plug-in inside),
``ssh`` (the job started in the background over ssh with the grid's key; an MPI job
is mpirun with a hostfile over the site's hosts through the same ssh), ``gram`` (an RSL
request to the site's GRAM gatekeeper from the grid's origin, GSI-authenticated; the fork
job manager runs it on the site's head, an MPI job as ``jobtype=mpi``), ``none`` (the
virtual cluster's agent, a site with no scheduler).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import kernels
from ..cluster import Cluster, Host, Site
from ..errors import UserError
from ..launch import mpi as mpi_flavours
from ..launch.base import Job
from ..launch.slurm import srun, tasks
from ..launch.vcluster import VIRTUAL_NIC, VClusterLauncher
from . import daemons, gram, slurm

NEVER_START = "CT_GRID_NEVER_START"  # tests: that Slurm site holds its subjobs (never starts)
STATES = ("pending", "active", "done", "failed")
JOBTYPES = ("single", "mpi")


@dataclass
class GridJob:
    executable: str
    arguments: list[str] = field(default_factory=list)
    count: int = 1
    environment: dict[str, str] = field(default_factory=dict)
    directory: str | None = None
    jobtype: str = "single"
    mpi: str = mpi_flavours.DEFAULT.name
    hosts: list[str] | None = None  # hosts of the site to use (default: all)
    barrier: str | None = None  # set by co-allocation: check in there, wait for "go"

    def check(self) -> None:
        if not self.executable:
            raise UserError("job: executable: missing")
        if not isinstance(self.count, int) or self.count < 1:
            raise UserError(f"job: count: must be a positive integer, got {self.count!r}")
        if self.jobtype not in JOBTYPES:
            raise UserError(f"job: jobtype: {self.jobtype!r} is not one of {', '.join(JOBTYPES)}")
        if self.mpi not in mpi_flavours.NAMES:
            raise UserError(f"job: mpi: {self.mpi!r} is not one of {', '.join(mpi_flavours.NAMES)}")
        for name in self.environment:
            if not name.isidentifier():
                raise UserError(f"job: environment: {name!r} is not a variable name")


@dataclass
class Handle:
    site: str
    backend: str
    dir: str  # the job's directory: script, out, err, exit
    id: str = ""  # the backend's id (Slurm job id, pid)
    submitted: float = 0.0


@dataclass
class Result:
    state: str
    exit_status: int | None
    stdout: str
    stderr: str


def write_exit(d: Path, status: str) -> str:
    """The shell line that records a job's exit status: written aside, then renamed, so
    that a reader never sees the file created but not yet written."""
    return f"echo {status} > {d}/exit.tmp && mv {d}/exit.tmp {d}/exit"


def exit_status(d: Path) -> int | None:
    """The status the job's exit file holds; None while there is none (or not a number)."""
    try:
        return int((d / "exit").read_text())
    except (OSError, ValueError):
        return None


def exit_state(d: Path) -> str:
    """done when the job's exit file says 0; failed otherwise (also: no exit file)."""
    return "done" if exit_status(d) == 0 else "failed"


class Backend:
    name = ""

    def __init__(self, grid: dict, site: dict):
        self.grid, self.site = grid, site

    def hosts(self, job: GridJob) -> list[str]:
        known = [h["name"] for h in self.site["hosts"]]
        for h in job.hosts or []:
            if h not in known:
                raise UserError(
                    f"job: hosts: {h!r} is not a host of {self.site['name']} ({', '.join(known)})"
                )
        return job.hosts or known

    def new_dir(self) -> Path:
        d = Path(self.grid["dir"]) / "jobs" / uuid.uuid4().hex[:12]
        d.mkdir(parents=True)
        d.chmod(0o755)
        return d

    def script(
        self, job: GridJob, d: Path, launch: list[str], env: dict[str, str], passed: bool = False
    ) -> str:
        """The job's shell script: its environment, directory, launch line, exit file.
        ``passed``: the launch line ends with the script's own arguments (the executable
        and arguments GRAM's job manager hands over)."""
        lines = ["#!/bin/sh", f"touch {d}/started"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in {**env, **job.environment}.items()]
        if job.barrier:  # co-allocation's start barrier: check in, then wait for go or abort
            b = shlex.quote(job.barrier)
            lines += [
                f"touch {b}/ready.{d.name}",
                f"while [ ! -e {b}/go ]; do if [ -e {b}/abort ]; then {write_exit(d, '98')}; "
                "exit 98; fi; sleep 0.1; done",
            ]
        if job.directory:
            lines.append(
                f"cd {shlex.quote(job.directory)} || {{ {write_exit(d, '127')}; exit 127; }}"
            )
        lines += [
            shlex.join(launch) + (' "$@"' if passed else ""),
            "rc=$?",
            write_exit(d, "$rc"),
            "exit $rc",
        ]
        return "\n".join(lines) + "\n"

    def submit(self, job: GridJob) -> Handle:
        raise NotImplementedError

    def poll(self, handle: Handle) -> str:
        raise NotImplementedError

    def cancel(self, handle: Handle) -> None:
        raise NotImplementedError

    def result(self, handle: Handle) -> Result:
        d = Path(handle.dir)
        state = self.poll(handle)
        status = exit_status(d)

        def read(name: str) -> str:
            p = d / name
            return p.read_text(errors="replace") if p.is_file() else ""

        return Result(state, status, read("out"), read("err"))


def srun_launch(job: GridJob, hosts: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """srun starting the job's count tasks inside its Slurm job (on ``hosts`` when given),
    an MPI job's as the ranks of its MPI kept on the virtual NIC; and the environment that
    needs."""
    if job.jobtype != "mpi":
        return srun(*tasks(job.count, hosts, None)), {}
    flavour = mpi_flavours.flavour(job.mpi)
    return srun(*tasks(job.count, hosts, flavour)), flavour.pinned_env(
        VIRTUAL_NIC, kernels.kernel_path
    )


class SlurmBackend(Backend):
    name = "slurm"

    def submit(self, job: GridJob) -> Handle:
        job.check()
        hosts = self.hosts(job)[: job.count]
        d = self.new_dir()
        srun, env = srun_launch(job, hosts)
        (d / "job.sh").write_text(self.script(job, d, srun + [job.executable, *job.arguments], env))
        hold = ["--hold"] if os.environ.get(NEVER_START) == self.site["name"] else []
        argv = [
            "sbatch",
            "--parsable",
            *hold,
            "--job-name",
            f"ct-{d.name}",
            "--ntasks",
            str(job.count),
            "--nodelist",
            ",".join(hosts),
            "--output",
            str(d / "out"),
            "--error",
            str(d / "err"),
            "--chdir",
            str(d),
            str(d / "job.sh"),
        ]
        out = slurm.run_client(self.site, argv)
        if out.returncode != 0:
            raise UserError(f"site {self.site['name']}: sbatch: {out.stderr.strip()[-300:]}")
        return Handle(
            self.site["name"], self.name, str(d), out.stdout.strip().split(";")[0], time.time()
        )

    def _show(self, handle: Handle) -> dict[str, str]:
        out = slurm.run_client(self.site, ["scontrol", "-o", "show", "job", handle.id]).stdout
        return dict(f.split("=", 1) for f in out.split() if "=" in f)

    def poll(self, handle: Handle) -> str:
        state = self._show(handle).get("JobState", "")
        if not state:  # no longer known to slurmctld: its own exit file tells
            return exit_state(Path(handle.dir))
        if state in ("PENDING", "CONFIGURING", "REQUEUED", "SUSPENDED"):
            return "pending"
        if state in ("RUNNING", "COMPLETING"):
            return "active"
        return "done" if state == "COMPLETED" else "failed"

    def cancel(self, handle: Handle) -> None:
        slurm.run_client(self.site, ["scancel", handle.id])


class ShellBackend(Backend):
    """A site without a batch system: the job runs in the background of a shell on the
    site's head, reached through ``self.shell`` (ssh, or the vcluster agent)."""

    name = "none"

    def shell(self, host: str, command: str) -> list[str]:
        from .. import vcluster

        agent = Path(vcluster.state_dir(self.grid["name"])) / "agent"
        return [str(agent), host, command]

    def mpi_launcher(self) -> VClusterLauncher:
        """The MPI launcher over the site's hosts: the virtual cluster's (hosts by name, on
        the virtual NIC, ranks not bound), reaching them through ``rsh_agent``; started
        by the job's script on the site's head."""
        hosts = tuple(
            Host(h["name"], h["address"], site=self.site["name"], namespace=h["namespace"])
            for h in self.site["hosts"]
        )
        sites = (Site(self.site["name"], VClusterLauncher.name),)
        return VClusterLauncher(
            Cluster(self.grid["name"], hosts, sites, extra={"agent": self.rsh_agent()})
        )

    def launch(self, job: GridJob, d: Path, hosts: list[str]) -> tuple[list[str], dict]:
        """(the launch line without the executable and its arguments, the environment it
        needs beside the job's own): an MPI launcher over ``hosts`` with a hostfile in
        ``d``, or count copies."""
        if job.jobtype == "mpi":
            launcher = self.mpi_launcher()
            mpi_job = Job(
                Path(job.executable), job.arguments, job.count, job.mpi, hosts, job.environment
            )
            launch = launcher.mpi_command(mpi_job, d)
            env = {
                k: v for k, v in launcher.launcher_env(mpi_job).items() if k not in job.environment
            }
        else:  # count copies, like GRAM's fork job manager
            env = {}
            launch = [
                "sh",
                "-c",
                'n=$0; p=; while [ $n -gt 0 ]; do "$@" & p="$p $!"; '
                "n=$((n-1)); done; s=0; for q in $p; do wait $q || s=$?; done; exit $s",
                str(job.count),
            ]
        return launch, env

    def submit(self, job: GridJob) -> Handle:
        job.check()
        hosts = self.hosts(job)
        d = self.new_dir()
        launch, env = self.launch(job, d, hosts)
        launch += [job.executable, *job.arguments]
        (d / "job.sh").write_text(self.script(job, d, launch, env))
        head = hosts[0]
        command = (
            f"nohup sh {d}/job.sh > {d}/out 2> {d}/err < /dev/null & echo $! > {d}/pid; cat {d}/pid"
        )
        out = subprocess.run(self.shell(head, command), capture_output=True, text=True, timeout=20)
        if out.returncode != 0:
            raise UserError(f"site {self.site['name']}: start failed: {out.stderr.strip()[-300:]}")
        return Handle(
            self.site["name"], self.name, str(d), f"{head}:{out.stdout.strip()}", time.time()
        )

    def rsh_agent(self) -> str:
        from .. import vcluster

        return str(vcluster.state_dir(self.grid["name"]) / "agent")

    def poll(self, handle: Handle) -> str:
        d = Path(handle.dir)
        if (d / "exit").is_file():
            return exit_state(d)
        host, pid = handle.id.split(":")
        check = f"kill -0 {pid} 2>/dev/null && echo alive || true"
        out = subprocess.run(self.shell(host, check), capture_output=True, text=True, timeout=20)
        if "alive" in out.stdout:
            return "active" if (d / "started").exists() else "pending"
        return exit_state(d)

    def cancel(self, handle: Handle) -> None:
        host, pid = handle.id.split(":")
        kill = f"pkill -TERM -P {pid}; kill -TERM {pid} 2>/dev/null; true"
        subprocess.run(self.shell(host, kill), capture_output=True, timeout=20)


class SshBackend(ShellBackend):
    name = "ssh"

    def shell(self, host: str, command: str) -> list[str]:
        from . import ssh

        origin = self.site["hosts"][0]["namespace"]
        return ssh.argv_on(Path(self.grid["dir"]), origin, host, command)

    def rsh_agent(self) -> str:
        return str(Path(self.grid["dir"]) / "ssh" / "ssh")


class GramBackend(ShellBackend):
    """A GRAM site: an RSL request to its gatekeeper (globusrun -b from the grid's origin),
    state from its job manager (globusrun -status), cancel by globusrun -kill. GRAM
    returns no exit status: the script writes it, as everywhere.

    ``lrm``: the job manager behind the gatekeeper: ``slurm`` when the site's Slurm is
    there (GCT's Slurm LRM: sbatch, the job's tasks started by srun inside its Slurm
    job), else ``fork`` (the job manager forks on the site's head; the script reaches the
    site's other hosts with the vcluster agent, the fork LRM has no access path)."""

    name = "gram"
    STATES = {
        "PENDING": "pending",
        "STAGE_IN": "pending",
        "UNSUBMITTED": "pending",
        "ACTIVE": "active",
        "STAGE_OUT": "active",
        "SUSPENDED": "active",
        "DONE": "done",
        "FAILED": "failed",
    }

    def __init__(self, grid: dict, site: dict, lrm: str | None = None):
        super().__init__(grid, site)
        self.lrm = lrm or site.get("lrm", "fork")

    def launch(self, job: GridJob, d: Path, hosts: list[str]) -> tuple[list[str], dict]:
        if self.lrm == "slurm":  # Slurm places the tasks: GRAM names no nodes
            return srun_launch(job, None)
        return super().launch(job, d, hosts)

    def request(self, job: GridJob, d: Path) -> dict:
        """The RSL attributes: the seed's (executable, arguments, count, environment,
        directory, jobtype) plus where its output goes. An MPI job is ``jobtype=mpi``
        (the site's mpiexec runs the job's script); count copies of a single job are the
        script's, so that their exit statuses are collected."""
        env = {
            **job.environment,
            gram.JOB_VAR: str(d),
            daemons.MARK: self.grid["name"],
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        run = (
            {
                "executable": job.executable,
                "arguments": job.arguments,
                "count": job.count,
                "jobtype": "mpi",
            }
            if job.jobtype == "mpi"
            else {
                "executable": "/bin/sh",
                "arguments": [str(d / "job.sh"), job.executable, *job.arguments],
                "jobtype": "single",
            }
        )  # GRAM's default, multiple, would start it count times
        if self.lrm == "slurm":  # sbatch -N hosts, and -n count for a single job's srun
            run.update(host_count=len(self.hosts(job)), count=job.count)
            if job.jobtype == "mpi":  # the Slurm LRM hands only Open MPI's to mpiexec once
                run["mpi_type"] = "openmpi"
        return {
            **run,
            "environment": env,
            "directory": job.directory or str(d),
            "stdout": str(d / "out"),
            "stderr": str(d / "err"),
        }

    def submit(self, job: GridJob) -> Handle:
        job.check()
        d = self.new_dir()
        launch, env = self.launch(job, d, self.hosts(job))
        (d / "job.sh").write_text(self.script(job, d, launch, env, passed=True))
        request = gram.rsl(self.request(job, d))
        (d / "job.rsl").write_text(request + "\n")
        mark = gram.log_mark(self.site)
        contact = gram.service_contact(self.site["contact"], self.lrm)
        out = gram.run_client(self.grid, ["globusrun", "-b", "-r", contact, request])
        job_contact = next((w for w in out.stdout.split() if w.startswith("https://")), "")
        if out.returncode != 0 or not job_contact:
            raise UserError(
                f"site {self.site['name']}: GRAM refused the job: "
                f"{gram.refusal(self.site, out.stdout + out.stderr, mark)}"
            )
        return Handle(self.site["name"], self.name, str(d), job_contact, time.time())

    def poll(self, handle: Handle) -> str:
        d = Path(handle.dir)
        if (d / "exit").is_file():
            return exit_state(d)
        try:
            out = gram.run_client(self.grid, ["globusrun", "-status", handle.id], timeout=20)
        except subprocess.TimeoutExpired:
            return "active"  # its job manager is slow to answer, not gone
        state = self.STATES.get(out.stdout.strip().split()[-1] if out.stdout.strip() else "")
        if state in (None, "done"):  # unknown to its job manager, or ended: the exit file
            return exit_state(d)
        if state == "active" and not (d / "started").exists():
            return "pending"
        return state

    def cancel(self, handle: Handle) -> None:
        gram.run_client(self.grid, ["globusrun", "-kill", handle.id], timeout=20)


BACKENDS = {b.name: b for b in (SlurmBackend, SshBackend, GramBackend, ShellBackend)}


def backend(grid: dict, site_name: str) -> Backend:
    for site in grid["sites"]:
        if site["name"] == site_name:
            return BACKENDS[site["scheduler"]](grid, site)
    known = ", ".join(s["name"] for s in grid["sites"])
    raise UserError(f"grid {grid['name']!r} has no site {site_name!r} (sites: {known})")


def wait(backend_: Backend, handle: Handle, timeout: float) -> Result:
    """Poll until done or failed; past ``timeout`` the job is cancelled and failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if backend_.poll(handle) in ("done", "failed"):
            return backend_.result(handle)
        time.sleep(0.2)
    backend_.cancel(handle)
    result = backend_.result(handle)
    result.state = "failed"
    result.stderr += f"\n(cancelled after {timeout:.0f} s)"
    return result


def to_json(obj) -> str:
    return json.dumps(asdict(obj))


__all__ = ["BACKENDS", "GridJob", "Handle", "Result", "STATES", "backend", "daemons", "wait"]
