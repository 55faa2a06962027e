"""Running one command with a deadline, and killing everything it started when it hangs.

A job's processes are marked with ``CLUSTERTUNE_JOB=<id>`` in their environment, which
every MPI launcher passes on to its daemons and ranks (through the vcluster agent and
local forks). On timeout the process group is killed first, then any process still
carrying the mark: ranks re-parented into namespaces or new sessions escape killpg.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

JOB_MARK = "CLUSTERTUNE_JOB"


@dataclass
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float
    timed_out: bool = False


def new_job_id() -> str:
    return uuid.uuid4().hex[:16]


def job_pids(job_id: str) -> list[int]:
    """Every process still carrying the mark of job ``job_id``, in any namespace."""
    needle = f"{JOB_MARK}={job_id}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


def kill_job(proc: subprocess.Popen, job_id: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        for pid in job_pids(job_id):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        try:
            proc.wait(timeout=2)
            if sig == signal.SIGKILL or not job_pids(job_id):
                return
        except subprocess.TimeoutExpired:
            continue


def start(
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    job_id: str | None = None,
) -> subprocess.Popen:
    """Start argv marked with a job id, in its own process group so it can be killed as one.

    The id is kept as ``proc.job_id``; :func:`kill_job` stops the process and its children.
    """
    job_id = job_id or new_job_id()
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env[JOB_MARK] = job_id
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    proc.job_id = job_id  # type: ignore[attr-defined]
    return proc


def run(
    argv: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    job_id: str | None = None,
) -> Completed:
    """Run argv to completion or until ``timeout`` seconds; never raises on failure."""
    begin = time.monotonic()
    try:
        proc = start(argv, env, cwd, job_id)
    except OSError as exc:
        return Completed(argv, 127, "", f"cannot start {argv[0]}: {exc.strerror}", 0.0)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_job(proc, proc.job_id)  # type: ignore[attr-defined]
        stdout, stderr = proc.communicate()
    return Completed(
        argv=argv,
        returncode=proc.returncode if not timed_out else -signal.SIGKILL,
        stdout=stdout,
        stderr=stderr,
        elapsed_s=time.monotonic() - begin,
        timed_out=timed_out,
    )
