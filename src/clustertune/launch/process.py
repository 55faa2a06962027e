"""Running one command with a deadline, and killing everything it started when it hangs,
when the user stops clustertune, or when clustertune itself dies.

Every process started here carries two marks in its environment, which every MPI
launcher passes on to its daemons and ranks (through the vcluster agent, ssh-less forks
and srun): ``CLUSTERTUNE_JOB=<id>`` (this job) and ``CLUSTERTUNE_OWNER=<token>`` (this
clustertune process). On timeout the process group is killed first, then any process
still carrying the job's mark: ranks re-parented into namespaces or new sessions escape
killpg. On SIGINT, SIGTERM or SIGHUP (:func:`stop_on_signals`) every process carrying
the owner's mark is killed, no new process starts (other threads' launches raise too), and
:class:`Interrupted` is raised once, so the run in progress is stored as interrupted;
later signals only kill. If clustertune is killed outright (SIGKILL), a watchdog started
with the first job (``launch/watchdog.py``) sees its pipe close and kills the same set.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

JOB_MARK = "CLUSTERTUNE_JOB"
OWNER_MARK = "CLUSTERTUNE_OWNER"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float
    timed_out: bool = False
    interrupted: bool = False


class Interrupted(KeyboardInterrupt):
    """The user (or a supervisor) stopped clustertune; ``completed`` is the job that was
    running in this thread when it happened, killed, with the output it had written."""

    def __init__(self, signum: int, completed: Completed | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.completed = completed


def signal_of(exc: KeyboardInterrupt) -> int:
    """The stop signal behind an interruption (a plain KeyboardInterrupt is SIGINT)."""
    return exc.signum if isinstance(exc, Interrupted) else signal.SIGINT


def new_job_id() -> str:
    return uuid.uuid4().hex[:16]


_stopping = threading.Event()  # a stop signal arrived: nothing new may start
_owner: str | None = None
_watchdog: subprocess.Popen | None = None
_watchdog_lock = threading.Lock()


def owner_token() -> str:
    """This clustertune process's mark, and its watchdog, both made on first use."""
    global _owner, _watchdog
    with _watchdog_lock:
        if _owner is None or not _owner.startswith(f"{os.getpid()}-"):  # new after a fork
            _owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
            env = {k: v for k, v in os.environ.items() if k not in (JOB_MARK, OWNER_MARK)}
            # stdin is the pipe whose end closes when this process dies, however it dies
            _watchdog = subprocess.Popen(
                [sys.executable, "-m", "clustertune.launch.watchdog", _owner],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        return _owner


def marked_pids(mark: str, value: str) -> list[int]:
    """Every process whose environment has ``mark=value``, in any namespace."""
    needle = f"{mark}={value}".encode()
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


def job_pids(job_id: str) -> list[int]:
    return marked_pids(JOB_MARK, job_id)


def kill_marked(mark: str, value: str, grace_s: float = 2.0) -> None:
    """SIGTERM every marked process, then SIGKILL what is left after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = marked_pids(mark, value)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and marked_pids(mark, value):
            time.sleep(0.05)


def kill_owned() -> None:
    """Kill every process any job of this clustertune process started."""
    if _owner is not None:
        kill_marked(OWNER_MARK, _owner)


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


def stop_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP stop every job of this process and raise Interrupted.

    The jobs run in sessions of their own (a terminal's Ctrl-C does not reach them), so
    they are killed here, at once, also those that other threads are waiting for. Only
    the first signal raises: a second one (Ctrl-C twice, a closing terminal's SIGHUP
    after SIGTERM) must not cut short the storing of the interrupted run.
    """

    def stop(signum, frame):
        first = not _stopping.is_set()
        _stopping.set()
        kill_owned()
        if not first:
            return
        if _held:  # raised when the held block ends
            _held[-1] = signum
            return
        raise Interrupted(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)


_held: list[int] = []  # one entry per open signals_held block: the signal it deferred, or 0


@contextlib.contextmanager
def signals_held():
    """A stop signal arriving in the block is acted on (jobs killed) but raised only when
    the block ends, so what the block writes (a record) is written whole."""
    _held.append(0)
    try:
        yield
    finally:
        signum = _held.pop()
        if signum:
            raise Interrupted(signum)


def start(
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    job_id: str | None = None,
) -> subprocess.Popen:
    """Start argv marked with a job id, in its own process group so it can be killed as one.

    The id is kept as ``proc.job_id``; :func:`kill_job` stops the process and its children.
    After a stop signal nothing starts: :class:`Interrupted` is raised instead.
    """
    if _stopping.is_set():
        raise Interrupted(signal.SIGINT)
    job_id = job_id or new_job_id()
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env[JOB_MARK] = job_id
    full_env[OWNER_MARK] = owner_token()
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
    """Run argv to completion or until ``timeout`` seconds; never raises on failure.

    Interrupted by the user, the job is killed and :class:`Interrupted` raised with what
    it had written.
    """
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
    except KeyboardInterrupt as exc:
        kill_job(proc, proc.job_id)  # type: ignore[attr-defined]
        stdout, stderr = proc.communicate()
        completed = Completed(
            argv, proc.returncode, stdout, stderr, time.monotonic() - begin, interrupted=True
        )
        raise Interrupted(signal_of(exc), completed) from None
    return Completed(
        argv=argv,
        returncode=proc.returncode if not timed_out else -signal.SIGKILL,
        stdout=stdout,
        stderr=stderr,
        elapsed_s=time.monotonic() - begin,
        timed_out=timed_out,
    )
