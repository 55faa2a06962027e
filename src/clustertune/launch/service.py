"""A service: a program started on one host beside a job (a TCP server, a PVM daemon, an
I/O forwarding server, a grid daemon), used as a context manager::

    with Service(launcher, "host1", argv, ready=re.compile(rb"listening on port (\\d+)")) as s:
        port = int(s.ready_match.group(1))
        ...                                   # the job that talks to it
    s.completed                               # its exit status, stdout and stderr

Start: spawned through the cluster's launcher, marked like every job (launch/process.py),
then ready when its stderr matches ``ready`` (or when a ``ready`` callable says so),
within ``start_timeout`` seconds, else a UserError quoting what it said. From then on
its output is read as it comes (a chatty server never blocks on a full pipe). Stop: it is
given ``stop_grace`` seconds to finish on its own (a server whose client said goodbye),
then killed with everything it started; a service still running after ``lifetime``
seconds is killed too. Whatever happens, nothing it started outlives the block.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import threading
import time
from collections.abc import Callable

from ..errors import UserError
from . import process
from .process import Completed

Ready = re.Pattern[bytes] | Callable[[], bool]
POLL_S = 0.1


class Service:
    def __init__(
        self,
        launcher,
        host: str,
        argv: list[str],
        *,
        ready: Ready,
        what: str | None = None,
        env: dict[str, str] | None = None,
        start_timeout: float = 15.0,
        stop_grace: float = 5.0,
        lifetime: float | None = None,
    ):
        launcher.cluster.host(host)  # an unknown host is a user error before anything starts
        self.argv = launcher.host_argv(host, argv)
        self.host = host
        self.what = what or f"{os.path.basename(argv[0])} on {host}"
        self.env = env
        self.ready = ready
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.lifetime = lifetime
        self.ready_match: re.Match[bytes] | None = None
        self.completed: Completed | None = None
        self._proc: subprocess.Popen | None = None
        self._early_stderr = b""
        self._drains: dict[str, tuple[threading.Thread, list[bytes]]] = {}
        self._begin = 0.0
        self._expired = threading.Event()

    def __enter__(self) -> Service:
        self._begin = time.monotonic()
        self._proc = process.start(self.argv, self.env)
        # stderr is read here until the ready line when ``ready`` is a pattern
        self._drain("stdout", *(() if isinstance(self.ready, re.Pattern) else ("stderr",)))
        try:
            became_ready = self._await_ready()
        except BaseException:
            self.stop(grace=0.0)
            raise
        self._drain("stderr")
        if not became_ready:
            exited = self._proc.poll() is not None
            said = self.stop(grace=0.0).stderr.strip()
            detail = said or (
                f"exit status {self._proc.returncode}"
                if exited
                else f"no answer within {self.start_timeout:.0f} s"
            )
            raise UserError(f"cannot start {self.what}: {detail[-300:]}")
        if self.lifetime is not None:
            timer = threading.Timer(self.lifetime, self._expire)
            timer.daemon = True
            timer.start()
        return self

    def __exit__(self, *exc) -> None:
        # interrupted or failed: no grace, the job it served is gone
        self.stop(grace=self.stop_grace if exc[0] is None else 0.0)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _expire(self) -> None:
        if self.running:
            self._expired.set()
            process.kill_job(self._proc, self._proc.job_id)  # type: ignore[union-attr,attr-defined]

    def _await_ready(self) -> bool:
        """Read stderr raw (select() sees every byte) until ``ready`` holds, the service
        exits, or start_timeout passes."""
        assert self._proc is not None and self._proc.stderr is not None
        deadline = time.monotonic() + self.start_timeout
        fd = self._proc.stderr.fileno()
        while (left := deadline - time.monotonic()) > 0:
            if callable(self.ready):
                if self.ready():
                    return True
                if self._proc.poll() is not None:
                    return False
                time.sleep(min(POLL_S, left))
                continue
            if not select.select([fd], [], [], left)[0]:
                return False
            chunk = os.read(fd, 4096)
            if not chunk:
                return False
            self._early_stderr += chunk
            self.ready_match = self.ready.search(self._early_stderr)
            if self.ready_match:
                return True
        return False

    def _drain(self, *names: str) -> None:
        """Read these of its pipes (stdout, stderr) in threads until they close."""
        for name in names:
            if name in self._drains:
                continue
            chunks: list[bytes] = []
            fd = getattr(self._proc, name).fileno()
            thread = threading.Thread(target=_read_all, args=(fd, chunks), daemon=True)
            thread.start()
            self._drains[name] = (thread, chunks)

    def stop(self, grace: float | None = None) -> Completed:
        """Let it finish within ``grace`` seconds, else kill it; its output, once."""
        if self.completed is not None:
            return self.completed
        assert self._proc is not None
        grace = self.stop_grace if grace is None else grace
        self._drain("stdout", "stderr")  # if it never got ready, stderr is not read yet
        try:
            self._proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill_job(self._proc, self._proc.job_id)  # type: ignore[attr-defined]
            self._proc.wait()
        out, err = (b"".join(_joined(*self._drains[name])) for name in ("stdout", "stderr"))
        self.completed = Completed(
            argv=self.argv,
            returncode=self._proc.returncode,
            stdout=out.decode(errors="replace"),
            stderr=(self._early_stderr + err).decode(errors="replace"),
            elapsed_s=time.monotonic() - self._begin,
            timed_out=self._expired.is_set(),
        )
        return self.completed


def _read_all(fd: int, chunks: list[bytes]) -> None:
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)


def _joined(thread: threading.Thread, chunks: list[bytes]) -> list[bytes]:
    # a grandchild that escaped the kill may hold the pipe open: do not wait for ever
    thread.join(timeout=5)
    return list(chunks)
