"""``net matrix``: every host pair, n-1 rounds of disjoint pairs at once, then diagnosis.

Each pair measures two sizes only, as ``ct-mpi-pingpong --pairs-round-robin`` does: one
byte (latency) and ``size`` bytes (bandwidth: the throughput of that size). Suspect links
are measured again before anyone is blamed (:func:`analysis.diagnose_with_retest`).
TCP pairs of a round run at the same time (a server and a client each); MPI runs the
kernel's round-robin mode with one rank per host, and re-tests a pair with two ranks.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ... import kernels, runner
from ...cluster import Cluster
from ...errors import UserError
from ...kernels import KernelOutput
from ...launch import Completed, Job, launcher_for
from ...results import Store
from . import analysis
from .pingpong import LEVEL, MPI_KERNEL, TCP_KERNEL, check_size, pair_rate_bps, run_tcp_pair

DEFAULT_SIZE = 1 << 20  # the MPI kernel's round-robin default
LATENCY_SIZE = 1
Pair = tuple[str, str]


def rounds(hosts: Sequence[str]) -> list[list[Pair]]:
    """The circle method of round-robin tournaments: n-1 rounds (n rounded up to even)
    of disjoint pairs covering every pair once; the odd host out sits a round out."""
    names = list(hosts)
    m = len(names) + len(names) % 2
    slots: list[str | None] = [*names, None][:m]
    result = []
    for _ in range(m - 1):
        pairs = [(slots[i], slots[m - 1 - i]) for i in range(m // 2)]
        result.append([(a, b) for a, b in pairs if a is not None and b is not None])
        slots = [slots[0], slots[-1], *slots[1:-1]]  # slot 0 stays, the others rotate
    return result


def disjoint_rounds(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """Greedy grouping of the suspect pairs into rounds in which no host appears twice."""
    result: list[list[Pair]] = []
    for pair in pairs:
        for r in result:
            if not {h for p in r for h in p} & set(pair):
                r.append(pair)
                break
        else:
            result.append([pair])
    return result


def measurement(a: str, b: str, samples: Sequence[dict]) -> dict:
    """Latency (smallest size) and bandwidth (throughput of the largest) of one pair."""
    curve = analysis.curve_from_points(samples)
    return {
        "pair": [a, b],
        "latency_us": analysis.latency_us(curve),
        "bandwidth_mbps": float(curve.throughput_mbps[-1]),
    }


class _Collector:
    """Samples, launches and failures of a whole matrix: one record at the end."""

    def __init__(self) -> None:
        self.samples: list[dict] = []
        self.commands: list[list[str]] = []
        self.problems: list[str] = []
        self.verification_failed = False
        self.timed_out = False
        self.stderr: list[str] = []

    def add(self, completed: Completed, output: KernelOutput, what: str) -> None:
        self.commands.append(completed.argv)
        self.problems += [f"{what}: {e}" for e in output.errors]
        if completed.timed_out:
            self.timed_out = True
            self.problems.append(f"{what}: timed out after {completed.elapsed_s:.0f} s")
        elif completed.returncode != 0 and not output.errors:
            self.problems.append(f"{what}: exit status {completed.returncode}")
        if output.result and output.result.get("verification") == "failed":
            self.verification_failed = True
        if completed.returncode != 0 and completed.stderr.strip():
            self.stderr.append(f"{what}: {completed.stderr.strip()[-300:]}")


# --------------------------------------------------------------------------- TCP


def _tcp_pair(
    cluster: Cluster, a: str, b: str, size: int, timeout: float, tag: dict, col: _Collector
) -> list[dict]:
    launcher = launcher_for(cluster)
    found = []
    for s in (LATENCY_SIZE, size):
        args = ["--min-size", str(s), "--max-size", str(s), "--perturbation", "0", "--trials", "3"]
        try:
            run = run_tcp_pair(launcher, a, b, args, timeout)
        except UserError as exc:  # the server could not start: this pair stays unmeasured
            col.problems.append(f"{a}-{b}: {exc}")
            return found
        col.add(run.completed, run.output, f"{a}-{b} {s} B")
        found += [{**sample, "host_a": a, "host_b": b, **tag} for sample in run.output.samples]
    return found


def tcp_round(
    cluster: Cluster, pairs: Sequence[Pair], size: int, tag: dict, col: _Collector
) -> dict[Pair, list[dict]]:
    """One round: every pair at the same time, each in its own thread."""
    timeout = max(_pair_timeout_s(cluster, a, b, size) for a, b in pairs)
    with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
        futures = {
            pair: pool.submit(_tcp_pair, cluster, *pair, size, timeout, tag, col) for pair in pairs
        }
        return {pair: f.result() for pair, f in futures.items()}


# --------------------------------------------------------------------------- MPI


def mpi_round_robin(
    cluster: Cluster, hosts: list[str], mpi: str, size: int, tag: dict, col: _Collector
) -> dict[Pair, list[dict]]:
    """The kernel's all-pairs mode over ``hosts``, one rank each (rank r on hosts[r])."""
    timeout = 60.0 + (len(hosts) - 1) * max(
        _pair_timeout_s(cluster, a, b, size) for r in rounds(hosts) for a, b in r
    )
    job = Job(
        kernel=kernels.kernel_path(MPI_KERNEL, mpi),
        args=["--pairs-round-robin", "--max-size", str(size), "--trials", "3"],
        np=len(hosts), mpi=mpi, hosts=hosts, timeout=timeout,
    )  # fmt: skip
    completed = launcher_for(cluster).run_mpi(job)
    output = kernels.parse_output(completed.stdout)
    col.add(completed, output, f"{mpi} all pairs of {','.join(hosts)}")
    found: dict[Pair, list[dict]] = {}
    for sample in output.samples:
        a, b = hosts[sample["a"]], hosts[sample["b"]]
        found.setdefault((a, b), []).append({**sample, "host_a": a, "host_b": b, **tag})
    return found


def _pair_timeout_s(cluster: Cluster, a: str, b: str, size: int) -> float:
    rate = pair_rate_bps(cluster, a, b) or 10**8
    return 60.0 + 40.0 * size * 8 / rate  # 4 round trips of the large message, x5


# --------------------------------------------------------------------------- the matrix


def run_matrix(
    cluster: Cluster,
    store: Store,
    layer: str = "tcp",
    mpi: str = "openmpi",
    size: int = DEFAULT_SIZE,
    hosts: list[str] | None = None,
) -> dict:
    """Measure every pair, diagnose with re-test, store one record and return it."""
    if layer not in ("tcp", "mpi"):
        raise UserError(f"--layer {layer!r}: net matrix runs over tcp or mpi")
    check_size(size)
    names = hosts or [h.name for h in cluster.hosts]
    for name in names:
        cluster.host(name)
    if len(names) < 2 or len(set(names)) != len(names):
        raise UserError(f"net matrix needs at least two distinct hosts, got {names}")
    kernel = TCP_KERNEL if layer == "tcp" else MPI_KERNEL
    params = {"command": "matrix", "layer": layer, "mpi": mpi if layer == "mpi" else None,
              "size": size, "hosts": names}  # fmt: skip
    record = runner.new_record(
        LEVEL, kernel, cluster, params, names,
        np=len(names) if layer == "mpi" else None, mpi=mpi if layer == "mpi" else None,
    )  # fmt: skip
    col = _Collector()
    start = time.monotonic()

    def measure(pairs: Sequence[Pair], retest: bool) -> list[dict]:
        found: dict[Pair, list[dict]] = {}
        if layer == "mpi" and not retest:
            found = mpi_round_robin(cluster, names, mpi, size, {"retest": False}, col)
        elif layer == "mpi":
            for a, b in pairs:
                found |= mpi_round_robin(cluster, [a, b], mpi, size, {"retest": True}, col)
        else:
            groups = rounds(names) if not retest else disjoint_rounds(pairs)
            for r, group in enumerate(groups):
                found |= tcp_round(cluster, group, size, {"round": r, "retest": retest}, col)
        result = []
        for (a, b), samples in found.items():
            col.samples += samples
            try:
                result.append(measurement(a, b, samples))
            except ValueError as exc:
                col.problems.append(f"{a}-{b}: {exc}")
        return result

    first = measure([], retest=False)
    diagnosis = None
    try:
        matrix = analysis.link_matrix(names, first)
        diagnosis = analysis.diagnose_with_retest(matrix, lambda s: measure(s, retest=True))
    except ValueError as exc:
        col.problems.append(f"analysis: {exc}")
    complete = not col.problems and not col.timed_out
    figures = {"size_bytes": size}
    if diagnosis is not None:
        figures |= diagnosis.to_json() | {"suspects": [list(p) for p in diagnosis.suspects]}
    # a pair that failed verification fails the matrix, however far it got
    output = KernelOutput(
        samples=col.samples,
        result={"verification": "failed" if col.verification_failed else "passed",
                "figures": figures} if complete or col.verification_failed else None,
        errors=col.problems,
    )  # fmt: skip
    completed = Completed(
        argv=[shlex.join(c) for c in col.commands],  # every launch, in order
        returncode=0 if complete else 1,
        stdout="",
        stderr="\n".join(col.stderr),
        elapsed_s=time.monotonic() - start,
        timed_out=col.timed_out,
    )
    runner.complete_record(record, completed, output)
    record["figures"] = figures | record["figures"]  # kept also when incomplete
    store.save(record)
    return record


# --------------------------------------------------------------------------- output


def matrix_json(record: dict) -> dict:
    f = record["figures"]
    return {
        "run_id": record["id"],
        "status": record["status"],
        "error": record["error"],
        "cluster": record["meta"]["cluster"]["name"],
        "layer": record["params"]["layer"],
        "mpi": record["params"]["mpi"],
        "size_bytes": f.get("size_bytes"),
        "hosts": f.get("hosts", record["params"]["hosts"]),
        "latency_us": f.get("latency_us"),
        "bandwidth_mbps": f.get("bandwidth_mbps"),
        "flagged": f.get("flagged", []),
        "notes": f.get("notes", []),
    }


def _grid(
    hosts: list[str], m: list[list[float | None]] | None, fmt: Callable[[float], str]
) -> list[str]:
    if m is None:
        return ["  (not measured)"]
    width = max(8, *(len(h) for h in hosts))
    lines = ["  " + " " * width + "".join(f"{h:>{width + 1}}" for h in hosts)]
    for h, row in zip(hosts, m, strict=True):
        cells = "".join(f"{'-' if v is None else fmt(v):>{width + 1}}" for v in row)
        lines.append(f"  {h:<{width}}{cells}")
    return lines


def matrix_text(record: dict) -> str:
    j = matrix_json(record)
    layer = j["layer"] + (f" ({j['mpi']})" if j["mpi"] else "")
    lines = [f"run {j['run_id']}: {layer} matrix on {j['cluster']} -> {j['status']}"]
    lines += ["  bandwidth (Mbit/s)", *_grid(j["hosts"], j["bandwidth_mbps"], lambda v: f"{v:.1f}")]
    lines += ["  latency (µs)", *_grid(j["hosts"], j["latency_us"], lambda v: f"{v:.1f}")]
    if j["flagged"]:
        lines += ["  flagged:"] + [f"    {f['reason']}" for f in j["flagged"]]
    else:
        lines.append("  flagged: nothing")
    lines += [f"  note: {n}" for n in j["notes"]]
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)
