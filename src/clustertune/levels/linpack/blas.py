"""``clustertune blas compare``: DGEMM and the LU with each installed BLAS (seeds/002 fig. 12).

The kernels link the generic ``libblas.so.3`` (Fortran symbols, which every Debian
alternative provides), so ``LD_LIBRARY_PATH=<the alternative's directory>`` selects the
library for one run without touching the system's alternatives. Each run is checked
against the kernel's own record of the library its ``dgemm_`` resolved to: a run that
loaded another library, or could not start (a symbol the kernel needs is missing), is a
failed record whose error says why.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ... import hostinfo
from ...cluster import Cluster
from ...commands import Output, add_job_options, cluster_of, open_store
from ...errors import UserError
from ...results import Store
from ...runner import Derive
from . import run

LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
ALTERNATIVE = "libblas.so.3-x86_64-linux-gnu"
# Debian's libblas.so.3 alternatives by directory, in the order they are compared
NAMES = {
    "openblas-pthread": "OpenBLAS",
    "openblas-openmp": "OpenBLAS (OpenMP)",
    "openblas-serial": "OpenBLAS (serial)",
    "blis-openmp": "BLIS",
    "blis-pthread": "BLIS (pthread)",
    "blis-serial": "BLIS (serial)",
    "atlas": "ATLAS",
    "blas": "reference BLAS",
}
# cores an OpenBLAS is also measured with, beside the one it picks by itself, each when
# the CPU has the ISA flags it needs (hostinfo.ISA_FLAGS): a CPU newer than the library
# can make it pick a slower core, or one that computes wrong results (seen on an Intel
# Sapphire Rapids VM with Debian's 0.3.21); the checked measurement decides
FORCED_CORES = {
    "Haswell": ("avx2", "fma"),
    "SkylakeX": ("avx512f", "avx512dq", "avx512vl"),
    "Cooperlake": ("avx512f", "avx512dq", "avx512vl", "avx512_bf16"),
}
MISSING_SYMBOL = re.compile(r"undefined symbol: (\S+)")


@dataclass(frozen=True)
class Blas:
    name: str
    directory: Path
    # OPENBLAS_CORETYPE to run with; None: the caller's, else the library's own choice
    coretype: str | None = None

    @property
    def library(self) -> Path:
        return self.directory / "libblas.so.3"

    @property
    def key(self) -> str:
        """One candidate: the library, and the OpenBLAS core when one is named."""
        return str(self.directory) + (f"#{self.coretype}" if self.coretype else "")

    @property
    def label(self) -> str:
        return self.name + (f" ({self.coretype} kernels)" if self.coretype else "")


_FACTS = """
import ctypes, json, sys
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError:
    sys.exit(3)
out = {}
for field, symbol in (("core", "openblas_get_corename"), ("version", "openblas_get_config"),
                      ("version", "bli_info_get_version_str")):
    func = getattr(lib, symbol, None)
    if func is not None:
        func.restype = ctypes.c_char_p
        out[field] = ("BLIS " if symbol.startswith("bli") else "") + func().decode()
print(json.dumps(out))
"""


@cache
def library_facts(library: Path) -> dict:
    """What a library says of itself, read in a child process without OPENBLAS_CORETYPE:
    ``core`` the OpenBLAS core it picks on this CPU (an empty value is not the same as
    none: 0.3.21 then runs Haswell kernels), ``version`` OpenBLAS's configuration string
    or BLIS's version; the file name (which carries the version of the others, such as
    libblas.so.3.11.0) when it says nothing."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _FACTS, str(library)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        facts = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        facts = {}
    facts.setdefault("version", library.resolve().name)
    return facts


def own_core(library: Path) -> str | None:
    """The core an OpenBLAS picks by itself on this CPU; None for another library."""
    return library_facts(library).get("core") or None


def core_variants(blas: Blas) -> list[Blas]:
    """The candidates of one library: an OpenBLAS with the core it picks by itself (named
    explicitly, so the run does not depend on the caller's OPENBLAS_CORETYPE) and with each
    of FORCED_CORES the CPU can run that it did not pick; any other library as it is."""
    own = own_core(blas.library)
    if own is None:
        return [blas]
    isa = set(hostinfo.cpu_info()["isa"])
    forced = [c for c, needs in FORCED_CORES.items() if isa.issuperset(needs)]
    cores = [own, *(c for c in forced if c.lower() != own.lower())]
    return [replace(blas, coretype=c) for c in cores]


def alternatives() -> list[Path]:
    """The directories ``update-alternatives`` lists for libblas.so.3 (empty without it)."""
    if shutil.which("update-alternatives") is None:
        return []
    out = subprocess.run(
        ["update-alternatives", "--list", ALTERNATIVE], capture_output=True, text=True, timeout=10
    )
    return [Path(line).parent for line in out.stdout.split() if line.endswith("libblas.so.3")]


def installed(libdir: Path = LIBDIR, listed: list[Path] | None = None) -> list[Blas]:
    """Every BLAS providing libblas.so.3 here: the known Debian directories that hold one,
    then any other directory the alternatives list names."""
    dirs = [libdir / d for d in NAMES]
    dirs += [d for d in (alternatives() if listed is None else listed) if d not in dirs]
    return [Blas(NAMES.get(d.name, d.name), d) for d in dirs if (d / "libblas.so.3").exists()]


def select(wanted: str | None, available: list[Blas]) -> list[Blas]:
    """``--blas`` (comma-separated names or directory names) applied to what is installed."""
    if not wanted:
        return available
    chosen = []
    for item in (w.strip() for w in wanted.split(",")):
        match = [b for b in available if item.lower() in (b.name.lower(), b.directory.name)]
        if not match:
            names = ", ".join(b.directory.name for b in available) or "none"
            raise UserError(f"--blas {item!r}: not installed here (installed: {names})")
        chosen += [b for b in match if b not in chosen]
    return chosen


def environment(blas: Blas) -> dict[str, str]:
    """The library first on the path; its core when the candidate names one (else the
    caller's OPENBLAS_CORETYPE, else the library's own choice)."""
    env = {"LD_LIBRARY_PATH": str(blas.directory)}
    if blas.coretype:
        env["OPENBLAS_CORETYPE"] = blas.coretype
    return env


def grid(np: int) -> tuple[int, int]:
    """The squarest P x Q = np with P <= Q (HPL's advice: flat rather than tall)."""
    p = max(d for d in range(1, math.isqrt(np) + 1) if np % d == 0)
    return p, np // p


def library_check(blas: Blas, derive: Derive | None = None) -> Derive:
    """A derive step that fails the record unless the kernel ran the selected library."""
    expected = blas.library.resolve().parent

    def check(samples: list[dict], result: dict | None) -> dict:
        ran = ((result or {}).get("detail") or {}).get("blas", {}).get("library", "")
        if not ran or Path(ran).resolve().parent != expected:
            raise ValueError(f"ran {ran or 'an unknown BLAS'}, not {blas.library}")
        return derive(samples, result) if derive else {}

    return check


def failure(record: dict) -> str:
    """Why a comparison run failed, in one line."""
    error = record.get("error") or record["status"]
    if m := MISSING_SYMBOL.search(error):
        return f"symbol {m[1]} missing from the library"
    return error.splitlines()[0]


def compare(
    cluster: Cluster,
    store: Store,
    blases: list[Blas],
    *,
    np: int,
    mpi: str,
    n: int,
    nb: int,
    gemm_n: int,
    timeout: float | None = None,
    hosts: list[str] | None = None,
) -> list[dict]:
    """DGEMM (every rank its own product: the aggregate rate, the LU's peak) and the LU
    with each BLAS, an OpenBLAS with each of its cores (core_variants); one stored
    record per BLAS x kernel, returned in that order. ``timeout``: run.TIMEOUT_S if None
    (read when called: importing run first imports this module before run is complete)."""
    timeout = run.TIMEOUT_S if timeout is None else timeout
    batch = uuid.uuid4().hex[:12]
    p, q = grid(np)
    records = []
    for blas in (v for b in blases for v in core_variants(b)):
        env = environment(blas)
        params = {
            "blas": {"name": blas.label, "directory": str(blas.directory), "key": blas.key},
            "compare": batch,
        }
        kargs = run.gemm_args(str(gemm_n), nb, "d", 1, True, 1, np)
        records.append(
            run.run_gemm(
                cluster,
                store,
                np,
                mpi,
                kargs,
                timeout=timeout,
                env=env,
                params=params,
                derive=library_check(blas),
                hosts=hosts,
            )
        )
        kargs = ["-N", str(n), "--nb", str(nb), "-P", str(p), "-Q", str(q), "--hpl-out", "-"]
        records.append(
            run.run_linpack(
                cluster,
                store,
                np,
                mpi,
                kargs,
                timeout=timeout,
                env=env,
                params=params,
                derive=library_check(blas, run.derive),
                hosts=hosts,
            )
        )
    return records


def rows(records: list[dict]) -> list[dict]:
    """One row per BLAS: library, kernel name, DGEMM and LU rates, residual verdict."""
    table: dict[str, dict] = {}
    for r in records:
        blas = r["params"]["blas"]
        row = table.setdefault(
            blas.get("key", blas["directory"]),
            {
                "blas": blas["name"],
                "directory": blas["directory"],
                "library": None,
                "core": None,
                "dgemm_gflops": None,
                "lu_gflops": None,
                "residual": None,
                "check": None,
                "failed": [],
            },
        )
        detail = r["detail"].get("blas", {})
        row["library"] = row["library"] or detail.get("library")
        row["core"] = row["core"] or detail.get("core") or detail.get("config")
        if r["status"] != "ok":
            row["failed"].append(f"{r['kernel']}: {failure(r)}")
        if r["kernel"] == "ct-gemm":
            row["dgemm_gflops"] = (
                r["figures"].get("best_dgemm_gflops") if r["status"] == "ok" else None
            )
        else:
            lu = run.results(r)
            if lu:
                row["lu_gflops"] = lu[0]["gflops"]
                row["residual"] = lu[0]["residual"]
            row["check"] = (
                "PASSED" if r["verification"] == "passed" and r["status"] == "ok" else "FAILED"
            )
        row.setdefault("runs", []).append(r["id"])
    return list(table.values())


def text(table: list[dict]) -> str:
    def num(v: float | None) -> str:
        return f"{v:.2f}" if v is not None else "-"

    lines = [
        f"{'BLAS':<18} {'library':<58} {'kernel':<12} {'DGEMM Gflops':>12} "
        f"{'LU Gflops':>10} {'% DGEMM':>8}  residual"
    ]
    for row in table:
        pct = (
            100 * row["lu_gflops"] / row["dgemm_gflops"]
            if row["lu_gflops"] and row["dgemm_gflops"]
            else None
        )
        resid = f"{row['residual']:.4g} " if row["residual"] is not None else ""
        lines.append(
            f"{row['blas']:<18} {row['library'] or str(row['directory']):<58} "
            f"{row['core'] or '-':<12} {num(row['dgemm_gflops']):>12} {num(row['lu_gflops']):>10} "
            f"{num(pct):>8}  {resid}{row['check'] or 'FAILED'}"
        )
        lines += [f"    failed: {reason}" for reason in row["failed"]]
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    blases = select(args.blas, installed())
    if not blases:
        raise UserError(f"no libblas.so.3 found under {LIBDIR} (install libopenblas0, ...)")
    records = compare(
        cluster,
        open_store(args),
        blases,
        np=args.np,
        mpi=args.mpi,
        n=args.n,
        nb=args.nb,
        gemm_n=args.gemm_n,
        timeout=args.timeout,
        hosts=args.hosts,
    )
    table = rows(records)
    failed = any(row["failed"] for row in table)
    payload = {"blas": table, "runs": [r["id"] for r in records]}
    return Output(payload, text(table), 1 if failed else 0)


def cmd_choose(args: argparse.Namespace) -> Output:
    """The host's default BLAS (choice.py): the stored one, or measured now; --again
    measures anew."""
    from . import choice

    cluster = cluster_of(args)
    if args.again:
        choice.forget(cluster)
    chosen = choice.resolve(cluster, open_store(args), args.np, args.mpi, args.hosts)
    if chosen is None:
        raise UserError("no BLAS passed its checks here (see the runs in the choice's store)")
    rates = chosen.get("rates", {})
    lines = [
        f"{chosen['label']}: {chosen['version']} ({chosen['how']}"
        f"{', ' + chosen['measured'] if 'measured' in chosen else ''})"
    ]
    for key, rate in sorted(
        (rates.get("final") or rates.get("screen") or {}).items(), key=lambda kv: -kv[1]
    ):
        lines.append(f"  {key:<70} {rate:8.1f} Gflop/s (DGEMM by CPU time)")
    lines += [f"  excluded {key}: {why}" for key, why in chosen.get("excluded", {}).items()]
    return Output(chosen, "\n".join(lines), 0)


def add_commands(sub, common) -> None:
    b = sub.add_parser("blas", help="BLAS libraries: compare, choose")
    bsub = b.add_subparsers(dest="blas_command", required=True)
    c = bsub.add_parser("compare", parents=[common], help="DGEMM and LU with every installed BLAS")
    add_job_options(c, timeout=run.TIMEOUT_S)
    c.add_argument("-N", dest="n", type=int, default=4000, help="LU order")
    c.add_argument("--nb", type=int, default=192)
    c.add_argument("--gemm-n", type=int, default=2000, help="order of each rank's DGEMM")
    c.add_argument("--blas", help="only these (names or directories, comma-separated)")
    c.set_defaults(func=cmd_compare)
    h = bsub.add_parser(
        "choose",
        parents=[common],
        help="this host's default BLAS: the stored choice, or measured now",
    )
    add_job_options(h, timeout=run.TIMEOUT_S)
    h.add_argument("--again", action="store_true", help="measure anew")
    h.set_defaults(func=cmd_choose)
