"""spec -> launch -> kernel JSON -> record -> store: the one path every measurement takes.

A measurement is a :class:`Run`: a context that owns one record and stores it when the
block ends, whatever happened. Inside it a level launches what the measurement needs:
an MPI job (:meth:`Run.mpi`), a plain program on one host (:meth:`Run.program`), a
service beside them (:meth:`Run.service`: a TCP server, a PVM daemon), as many as it
needs, from several threads if they run at once. Every launch becomes a *step*, in the
order the launches began; the record's samples are the steps' samples, its result the
last result line of a job or program (never a service's) or, for a ``composite`` run,
only what the level sets in ``run.result``; its verification is failed if any step's was,
and its error names every step's problem. Stopped by the user, the run is stored as
``interrupted`` with what it had measured (``failed`` if a check already failed); an
exception after something ran stores it as failed. The record is saved with the stop
signals blocked, so a second Ctrl-C cannot lose it. ``run_kernel`` is the common case:
one MPI job, one record.

This is the one module that stores records: a run of something launched elsewhere (a
grid job through its site's scheduler) is a composite run that began ``since`` then; a
session built on other runs (a tuner's) is verified by the runs it ``rests_on``; the
store's ``meta`` (a study point's tag) is added to every record stored through it.
"""

from __future__ import annotations

import copy
import datetime
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from . import __version__, kernels, vcluster
from .cluster import Cluster
from .errors import UserError
from .kernels import KernelOutput
from .launch import process
from .launch.base import Job
from .launch.launchers import launcher_for
from .launch.process import Completed, Interrupted
from .launch.service import Ready, Service
from .results import SCHEMA, Store

# Environment knobs that change what a kernel measures; every one set is recorded.
ENV_KNOBS = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
)
ENV_KNOB_PREFIXES = ("CT_", "OMPI_MCA_", "PMIX_MCA_", "UCX_", "MPIR_CVAR_", "HYDRA_", "FI_")
STDERR_TAIL = 2000
LAUNCHER_LINES = 8  # the last lines of the launcher's text kept in a failed run's error

Derive = Callable[[list[dict], dict | None], dict]

# The load per CPU above which the figures of hosts sharing this machine's CPUs are not
# judged (busy-polling MPI ranks starve: healthy MPICH lost at most 21 % of TCP's
# bandwidth at load 5-11 on 2 CPUs, 58-71 % in four runs at load 15-29; docs/network.md).
# One constant for the network CLI and the report (record meta "load" and "cpus").
STARVED_LOAD_PER_CPU = 5.0

# The emulated wire's own check (vcluster.wire_lateness): a run whose pacers released
# packets later than this at the 99th percentile is labelled "wire late": its latency
# figures and flags may be the wire's, not the hosts' (threshold: docs/network.md).
WIRE_LATE_P99_US = 200.0


def machine() -> dict:
    """This machine's load and CPUs now, for a record's meta."""
    return {
        "load": [round(x, 2) for x in os.getloadavg()],
        "online": os.cpu_count(),
        "usable": len(os.sched_getaffinity(0)),
    }


def wire_state(cluster: Cluster) -> dict | None:
    """The vcluster state behind a virtual cluster or grid (its pacers), else None."""
    directory = cluster.extra.get("state_dir")
    return vcluster.load_state(Path(directory).name) if directory else None


def wire_late_label(late: dict[str, dict], load: float) -> str | None:
    """``wire late (p99 N µs, load L)`` when a pacer's p99 over the run passed
    :data:`WIRE_LATE_P99_US`, naming the worst; else None."""
    p99 = max((v["p99_us"] for v in late.values() if v["p99_us"] is not None), default=None)
    if p99 is None or p99 <= WIRE_LATE_P99_US:
        return None
    return f"wire late (p99 {p99:g} µs, load {load:.1f})"


def labels_text(record: dict) -> str:
    """The record's labels (meta "labels": a late wire, unreadable wire stats) as one
    line for a level's text, the report's run tables and the first screen; "" if none."""
    return "; ".join(record["meta"].get("labels") or [])


def wire_late(record: dict) -> str | None:
    """The record's "wire late ..." label (wire_late_label), if its wire was late."""
    return next((x for x in record["meta"].get("labels") or [] if x.startswith("wire late")), None)


def mid_size_not_judged(record: dict) -> str | None:
    """Why the record's mid-size figures (curve dips, n½, saturation point) are not read
    as the link's: "tbf wire" (a bucket lets messages smaller than itself outrun the
    link, docs/network.md) or "wire not recorded" (a virtual cluster's record from before
    meta "wire": tbf was the default then); None on a paced wire or a real cluster."""
    cluster = record["meta"].get("cluster") or {}
    if "wire" in cluster:
        return None if cluster["wire"] in ("paced", None) else f"{cluster['wire']} wire"
    virtual = str(cluster.get("source", "")).startswith(("vcluster:", "grid:"))
    return "wire not recorded" if virtual else None


@cache
def tool_commit() -> str | None:
    repo = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def now_iso() -> str:
    return iso(time.time())


def iso(timestamp: float) -> str:
    """A time.time() value as a record's UTC time stamp."""
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def env_knobs(job_env: dict[str, str] | None = None) -> dict[str, str]:
    """Every variable of this environment that tunes a kernel, a BLAS or an MPI library,
    and every variable the level set for the job (LD_LIBRARY_PATH picking a BLAS, ...)."""
    knobs = {
        k: v for k, v in os.environ.items() if k in ENV_KNOBS or k.startswith(ENV_KNOB_PREFIXES)
    }
    return dict(sorted({**knobs, **(job_env or {})}.items()))


def new_record(
    level: str,
    kernel: str,
    cluster: Cluster,
    params: dict,
    hosts: list[str],
    np: int | None = None,
    mpi: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> dict:
    from .hostinfo import blas_info, mpi_versions  # local: hostinfo is heavier to import

    start = machine()
    return {
        "schema": SCHEMA,
        "id": None,
        "level": level,
        "kernel": kernel,
        "status": "incomplete",
        "verification": "not-verified",
        "started": now_iso(),
        "elapsed_s": None,
        "meta": {
            "tool_version": __version__,
            "commit": tool_commit(),
            "cluster": {
                "name": cluster.name,
                "launcher": ", ".join(sorted({s.launcher for s in cluster.sites})),
                "source": cluster.source,
                "hosts": [h.name for h in cluster.hosts],
                "link_bps": {h.name: h.link_bps for h in cluster.hosts},
                "site_of": {h.name: h.site for h in cluster.hosts},
                "faults": cluster.extra.get("faults") or {},  # injected, at the run's start
                "wire": cluster.extra.get("wire"),  # a virtual link's model; None: real
            },
            "hosts": hosts,
            "np": np,
            "mpi": {"flavour": mpi, "version": mpi_versions().get(mpi)} if mpi else None,
            "blas": blas_info(),
            "env": env_knobs(extra_env),
            "commands": [],
            # the machine: load average (1, 5, 15 min) at the start and end, CPUs
            "load": {"start": start["load"], "end": None},
            "cpus": {"online": start["online"], "usable": start["usable"]},
        },
        "params": params,
        "samples": [],
        "figures": {},
        "detail": {},
        "error": None,
    }


@dataclass
class Step:
    """One launch of a run and what it wrote."""

    what: str
    completed: Completed
    output: KernelOutput
    is_service: bool = False  # stopped by the run: its exit status is not judged
    order: int = 0  # when its launch began, among the run's launches

    @property
    def failed(self) -> bool:
        """Its kernel reported a failed verification."""
        return (self.output.result or {}).get("verification") == "failed"

    @property
    def problems(self) -> list[str]:
        found = list(self.output.errors)
        c = self.completed
        if c.interrupted:
            found.append(f"interrupted after {c.elapsed_s:.0f} s; the job was killed")
        elif c.timed_out:
            found.append(f"timed out after {c.elapsed_s:.0f} s; the job was killed")
        elif c.returncode != 0 and not self.is_service:
            said = self.launcher_said if not found else None
            found.append(
                f"exit status {c.returncode}" + (f"; the launcher said: {said}" if said else "")
            )
        return found

    @property
    def launcher_said(self) -> str | None:
        """The launcher's own lines on the job's stdout (kernels write JSON lines there): MPICH's
        hydra reports a rank's death by a signal only there ("BAD TERMINATION ... EXIT STRING:
        Hangup (signal 1)", exit status = the signal), where stderr's tail does not reach."""
        lines = [
            t
            for t in (line.strip(" =\t") for line in self.completed.stdout.splitlines())
            if t and not t.startswith("{")
        ]
        return " / ".join(lines[-LAUNCHER_LINES:]) or None


class Run:
    """One measurement and its record (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        store: Store,
        *,
        level: str,
        kernel: str,
        params: dict | None = None,
        hosts: list[str] | None = None,
        np: int | None = None,
        mpi: str | None = None,
        env: dict[str, str] | None = None,
        derive: Derive | None = None,
        composite: bool = False,
        since: float | None = None,
    ):
        """``composite``: the level combines the steps itself and sets ``run.result``
        (None: the run has no result); otherwise the last job's result line is the run's.
        ``since``: the time (time.time()) the measurement began, when that was before the
        run (a job submitted through a scheduler, then waited for): the record's start
        and elapsed time count from it."""
        self.cluster = cluster
        self.composite = composite
        self.store = store
        self.launcher = launcher_for(cluster)
        self.env = dict(env or {})
        self.derive = derive
        self.record = new_record(
            level,
            kernel,
            cluster,
            params or {},
            hosts or [h.name for h in cluster.hosts],
            np,
            mpi,
            self.env,
        )
        if since is not None:
            self.record["started"] = iso(since)
        self.since = since
        self.steps: list[Step] = []
        self.result: dict | None = None  # set by a composite run; else the last result line
        self.figures: dict = {}  # figures the level adds whatever the status
        self.problems: list[str] = []  # what the level found wrong beyond the steps' own
        self._lock = threading.Lock()
        self._launches = 0
        self._begin = 0.0
        self._wire: dict | None = None  # the pacers' state, on a virtual cluster
        self._late_before: dict[str, dict] = {}
        self._evidence: tuple[list[dict], list[dict]] | None = None  # see rests_on

    @classmethod
    def for_job(
        cls,
        cluster: Cluster,
        store: Store,
        *,
        level: str,
        kernel: str,
        np: int,
        mpi: str,
        hosts: list[str] | None = None,
        **options,
    ) -> Run:
        """The run of one MPI job of ``np`` ranks: its record names the hosts the launch
        will place them on (``hosts``, else the cluster's first ones it needs)."""
        job = Job(kernel=Path(kernel), args=[], np=np, mpi=mpi, hosts=hosts)
        used = job.hosts_used(cluster)
        return cls(
            cluster, store, level=level, kernel=kernel, hosts=used, np=np, mpi=mpi, **options
        )

    # ----------------------------------------------------------------- launching

    def mpi(
        self,
        kernel: str,
        *,
        np: int,
        mpi: str,
        args: list[str],
        hosts: list[str] | None = None,
        timeout: float,
        what: str | None = None,
        tag: dict | None = None,
    ) -> Step:
        """An MPI job of ``np`` ranks of ``kernel`` built for ``mpi``."""
        job = Job(
            kernel=kernels.kernel_path(kernel, mpi),
            args=list(args),
            np=np,
            mpi=mpi,
            hosts=hosts,
            env=self.env,
            timeout=timeout,
        )
        self.record["meta"].setdefault("job_ids", []).append(job.job_id)
        return self._step(what or kernel, lambda: self.launcher.run_mpi(job), tag)

    def program(
        self,
        host: str,
        argv: list[str],
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        what: str | None = None,
        tag: dict | None = None,
    ) -> Step:
        """A plain program (no MPI) on one host."""
        env = {**self.env, **(env or {})}
        return self._step(
            what or f"{Path(argv[0]).name} on {host}",
            lambda: self.launcher.run_on_host(host, argv, timeout, env),
            tag,
        )

    def service(self, host: str, argv: list[str], *, ready: Ready, **options) -> _RunService:
        """A program beside the run's jobs (options: see launch.service.Service), with the
        run's environment; when its block ends its output joins the run as a step."""
        options["env"] = {**self.env, **(options.get("env") or {})}
        return _RunService(self, self.launcher.service(host, argv, ready=ready, **options))

    def next_launch(self) -> int:
        with self._lock:
            self._launches += 1
            return self._launches

    def _step(self, what: str, launch: Callable[[], Completed], tag: dict | None) -> Step:
        order = self.next_launch()
        try:
            completed = launch()
        except Interrupted as exc:
            if exc.completed is not None:
                self.add(what, exc.completed, tag=tag, order=order)
            raise
        return self.add(what, completed, tag=tag, order=order)

    def add(
        self,
        what: str,
        completed: Completed,
        *,
        tag: dict | None = None,
        is_service: bool = False,
        order: int | None = None,
    ) -> Step:
        order = self.next_launch() if order is None else order
        step = Step(what, completed, kernels.parse_output(completed.stdout), is_service, order)
        if tag:
            step.output.samples = [{**s, **tag} for s in step.output.samples]
        if len(self.cluster.sites) > 1:  # the rank-to-site map, where sites differ
            site_of = {h.name: h.site for h in self.cluster.hosts}
            step.output.samples = [
                {**s, "site": site_of[s["host"]]} if s.get("host") in site_of else s
                for s in step.output.samples
            ]
        with self._lock:
            self.steps.append(step)
        return step

    # ----------------------------------------------------------------- the record

    def rests_on(self, kept: list[dict], chosen: list[dict]) -> None:
        """A session that launches nothing itself (a tuner's) is verified by the stored
        runs its choice rests on: ``kept``, every run whose figures it used, and
        ``chosen``, those that ran the chosen settings again after the search. Passed
        only when every one of them passed its own verification and ``chosen`` is not
        empty; failed otherwise, the error naming the runs (see session_verification)."""
        self._evidence = (kept, chosen)

    def __enter__(self) -> Run:
        self._wire = wire_state(self.cluster)
        if self._wire is not None:
            self._late_before = vcluster.wire_lateness(self._wire)
        self._begin = time.monotonic()
        if self.since is not None:
            self._begin -= max(0.0, time.time() - self.since)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        elif issubclass(exc_type, KeyboardInterrupt):
            process.kill_owned()  # launches other threads made after the signal, if any
            self.finish(interrupted=True)
        elif self.steps and issubclass(exc_type, Exception):  # measured something: keep it
            self.finish(failure=str(exc) if issubclass(exc_type, UserError) else repr(exc))

    def finish(self, *, interrupted: bool = False, failure: str | None = None) -> dict:
        """Complete the record from the steps and store it. Verification decides the
        status: a run that failed verification is failed, whatever numbers it printed."""
        with process.signals_held():
            return self._finish(interrupted, failure)

    def _finish(self, interrupted: bool, failure: str | None) -> dict:
        record = self.record
        steps = sorted(self.steps, key=lambda s: s.order)
        record["meta"]["commands"] = [s.completed.argv for s in steps]
        record["elapsed_s"] = round(time.monotonic() - self._begin, 3)
        self._machine_after(record["meta"])
        record["samples"] = [sample for s in steps for sample in s.output.samples]
        several = len(steps) > 1
        problems = [f"{s.what}: {p}" if several else p for s in steps for p in s.problems]
        problems += self.problems
        if failure:
            problems.append(failure)
        result = self.result
        if result is None and not self.composite:
            result = next(
                (s.output.result for s in reversed(steps) if s.output.result and not s.is_service),
                None,
            )
        if result is not None:
            record["verification"] = result.get("verification", "not-verified")
            record["figures"] = dict(result.get("figures", {}))
            record["detail"] = dict(result.get("detail", {}))
            ran = record["detail"].get("blas")
            if isinstance(ran, dict):  # the library the kernel loaded beats the system default
                record["meta"]["blas"] = {
                    "library": ran.get("library"),
                    "openblas_core": ran.get("core"),
                    "openblas_config": ran.get("config"),
                }
        # each rank's wall and CPU time (kernels/common/ct_mpi.h), of the last MPI launch
        ranks = next((s.output.ranks for s in reversed(steps) if s.output.ranks), None)
        if ranks:
            record["detail"]["rank_times"] = sorted(ranks, key=lambda r: r.get("rank", 0))
        if any(s.failed for s in steps):
            record["verification"] = "failed"  # e.g. a server that saw corrupt data
        if self._evidence is not None:
            verification, why = session_verification(*self._evidence)
            if record["verification"] != "failed":  # the level's own check may fail it too
                record["verification"] = verification
            problems += why
        if result is None and not problems:
            problems.append("the kernel wrote no result line")
        if self.derive is not None and record["samples"]:
            try:
                record["figures"].update(self.derive(record["samples"], result))
            except ValueError as exc:
                problems.append(f"analysis: {exc}")
        record["figures"] = self.figures | record["figures"]
        timed_out = any(s.completed.timed_out for s in steps)
        if interrupted:
            record["status"] = "interrupted"
            problems.insert(0, "interrupted by the user")
        elif result is not None and not problems:
            record["status"] = "ok"
        elif result is None and record["samples"] and not timed_out and not failure:
            record["status"] = "incomplete"
        else:
            record["status"] = "failed"
        if record["verification"] == "failed":
            problems.insert(0, "verification failed")
            record["status"] = "failed"
        if problems:
            tails = [s.completed.stderr.strip() for s in steps if s.problems or s.failed]
            tail = "\n".join(t for t in tails if t)[-STDERR_TAIL:]
            record["error"] = "; ".join(dict.fromkeys(problems)) + (f"\n{tail}" if tail else "")
        record["meta"].update(copy.deepcopy(self.store.meta))  # a study point's tag
        self.store.save(record)
        return record

    def _machine_after(self, meta: dict) -> None:
        """The load at the end and, on a virtual cluster, how late its wire was over the
        run (meta "wire_late"; meta "labels" gets "wire late ..." when that distorts)."""
        meta["load"]["end"] = machine()["load"]
        if self._wire is None:
            return
        try:
            late = vcluster.lateness_delta(self._late_before, vcluster.wire_lateness(self._wire))
        except (OSError, ValueError, KeyError) as exc:  # the record is stored regardless
            meta.setdefault("labels", []).append(f"wire lateness unreadable: {exc!r}")
            return
        meta["wire_late"] = vcluster.without_hist(late)
        label = wire_late_label(late, max(meta["load"]["start"][0], meta["load"]["end"][0]))
        if label:
            meta.setdefault("labels", []).append(label)


def session_verification(kept: list[dict], chosen: list[dict]) -> tuple[str, list[str]]:
    """A session's verification from the runs it rests on (Run.rests_on) and why it
    failed: every kept run passed its own verification, and the chosen settings were
    run and verified (``chosen`` not empty, each passed)."""
    why = [
        f"run {r['id']} it kept is {r['status']} (verification {r['verification']})"
        for r in kept
        if r["verification"] != "passed"
    ]
    if not chosen:
        why.append("the chosen settings were not run again")
    why += [
        f"run {r['id']} of the chosen settings is {r['status']} (verification {r['verification']})"
        for r in chosen
        if r["verification"] != "passed" and r not in kept
    ]
    return ("failed" if why else "passed"), why


class _RunService:
    """A service whose output joins its run as a step when its block ends."""

    def __init__(self, run: Run, service: Service):
        self.run, self.service = run, service
        self.step: Step | None = None  # once the block has ended

    def __enter__(self) -> Service:
        self.order = self.run.next_launch()
        return self.service.__enter__()

    def __exit__(self, *exc) -> None:
        try:
            self.service.__exit__(*exc)
        finally:
            if self.service.completed is not None:
                self.step = self.run.add(
                    self.service.what, self.service.completed, is_service=True, order=self.order
                )


def run_kernel(
    cluster: Cluster,
    store: Store,
    *,
    level: str,
    kernel: str,
    np: int,
    mpi: str,
    args: list[str] | None = None,
    params: dict | None = None,
    hosts: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600.0,
    derive: Derive | None = None,
) -> dict:
    """Run an MPI kernel on ``cluster`` and store its record, whatever the outcome."""
    with Run.for_job(
        cluster,
        store,
        level=level,
        kernel=kernel,
        np=np,
        mpi=mpi,
        hosts=hosts,
        params=params,
        env=env,
        derive=derive,
    ) as run:
        run.mpi(kernel, np=np, mpi=mpi, args=list(args or []), hosts=hosts, timeout=timeout)
    return run.record
