"""spec -> launch -> kernel JSON -> record -> store: the one path every measurement takes."""

from __future__ import annotations

import datetime
import os
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

from . import __version__, kernels
from .cluster import Cluster
from .kernels import KernelOutput
from .launch import Completed, Job, launcher_for
from .results import SCHEMA, Store

# Environment knobs that change what a kernel measures; recorded with every run.
ENV_KNOBS = (
    "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "UCX_TLS",
    "UCX_NET_DEVICES", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
)  # fmt: skip
STDERR_TAIL = 2000

Derive = Callable[[list[dict], dict | None], dict]


@cache
def tool_commit() -> str | None:
    repo = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=5,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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

    env = {k: os.environ[k] for k in ENV_KNOBS if k in os.environ}
    env.update(extra_env or {})
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
                "launcher": cluster.launcher,
                "source": cluster.source,
                "hosts": [h.name for h in cluster.hosts],
                "link_bps": {h.name: h.link_bps for h in cluster.hosts},
            },
            "hosts": hosts,
            "np": np,
            "mpi": {"flavour": mpi, "version": mpi_versions().get(mpi)} if mpi else None,
            "blas": blas_info(),
            "env": env,
            "command": None,
        },
        "params": params,
        "samples": [],
        "figures": {},
        "detail": {},
        "error": None,
    }


def complete_record(
    record: dict, completed: Completed, output: KernelOutput, derive: Derive | None = None
) -> dict:
    """Fill a record from a finished (or killed) kernel. Verification decides the status:
    a run that failed verification is failed, whatever numbers it printed."""
    record["meta"]["command"] = completed.argv
    record["elapsed_s"] = round(completed.elapsed_s, 3)
    record["samples"] = output.samples
    problems = list(output.errors)
    if output.result is not None:
        record["verification"] = output.result.get("verification", "not-verified")
        record["figures"] = dict(output.result.get("figures", {}))
        record["detail"] = dict(output.result.get("detail", {}))
        ran = record["detail"].get("blas")
        if isinstance(ran, dict):  # the library the kernel loaded beats the system default
            record["meta"]["blas"] = {
                "library": ran.get("library"),
                "openblas_core": ran.get("core"),
                "openblas_config": ran.get("config"),
            }
    if completed.timed_out:
        problems.append(f"timed out after {completed.elapsed_s:.0f} s; the job was killed")
    elif completed.returncode != 0:
        problems.append(f"exit status {completed.returncode}")
    if output.result is None and not problems:
        problems.append("the kernel wrote no result line")
    if derive is not None and output.samples:
        try:
            record["figures"].update(derive(output.samples, output.result))
        except ValueError as exc:
            problems.append(f"analysis: {exc}")
    if output.result is not None and not problems:
        record["status"] = "failed" if record["verification"] == "failed" else "ok"
    elif output.result is None and output.samples and not completed.timed_out:
        record["status"] = "incomplete"
    else:
        record["status"] = "failed"
    if record["verification"] == "failed":
        problems.insert(0, "verification failed")
        record["status"] = "failed"
    if problems:
        stderr_tail = completed.stderr.strip()[-STDERR_TAIL:]
        record["error"] = "; ".join(problems) + (f"\n{stderr_tail}" if stderr_tail else "")
    return record


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
    launcher = launcher_for(cluster)
    job = Job(
        kernel=kernels.kernel_path(kernel, mpi),
        args=list(args or []),
        np=np,
        mpi=mpi,
        hosts=hosts,
        env=dict(env or {}),
        timeout=timeout,
    )
    record = new_record(
        level, kernel, cluster, params or {}, job.hosts_used(cluster), np, mpi, job.env
    )
    record["meta"]["job_id"] = job.job_id
    completed = launcher.run_mpi(job)
    complete_record(record, completed, kernels.parse_output(completed.stdout), derive)
    store.save(record)
    return record
