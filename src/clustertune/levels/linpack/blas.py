"""The BLAS libraries a run can use: every installed ``libblas.so.3`` alternative (and an
OpenBLAS once per core it can run), how a run selects one, and how its record proves which
one ran. ``clustertune blas compare|choose`` are in compare.py.

The kernels link the generic ``libblas.so.3`` (Fortran symbols, which every Debian
alternative provides), so ``LD_LIBRARY_PATH=<the alternative's directory>`` selects the
library for one run without touching the system's alternatives. Each run is checked
against the kernel's own record of the library its ``dgemm_`` resolved to: a run that
loaded another library, or could not start (a symbol the kernel needs is missing), is a
failed record whose error says why.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from ... import hostinfo
from ...errors import UserError
from ...runner import Derive

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


# what each library said of itself (library_facts), read once per process
_FACTS_READ: dict[Path, dict] = {}
# ... and kept between processes in the BLAS cache directory by facts_stamp: every run
# that names no BLAS computes the choice's key from the facts of every installed
# library, which cost it a Python child per library (~1 s in all at load 12)
FACTS_FILE = "library-facts.json"
# what the stored facts hold (part of their stamp: facts stored before "forced" was
# read are read again)
FACTS_KIND = "core, version, forced"


def library_facts(library: Path) -> dict:
    """What a library says of itself, read in a child process without OPENBLAS_CORETYPE:
    ``core`` the OpenBLAS core it picks on this CPU (an empty value is not the same as
    none: 0.3.21 then runs Haswell kernels), ``version`` OpenBLAS's configuration string
    or BLIS's version; the file name (which carries the version of the others, such as
    libblas.so.3.11.0) when it says nothing. An OpenBLAS's ``forced``: the core it runs
    with each of FORCED_CORES the CPU can run as OPENBLAS_CORETYPE (one child each)."""
    read_facts([library])
    return _FACTS_READ[library]


def facts_stamp(library: Path) -> str:
    """What a library's facts depend on: its file, size and mtime, and the CPU (an
    OpenBLAS picks its core from it; a home directory may be shared by other machines)."""
    real = library.resolve()
    stat = real.stat()
    cpu = hostinfo.cpu_info()
    said = [str(real), stat.st_size, stat.st_mtime_ns, cpu["model"], cpu["isa"], FACTS_KIND]
    return hashlib.sha256(json.dumps(said).encode()).hexdigest()[:16]


def read_facts(libraries: list[Path]) -> None:
    """library_facts of several libraries: those stored for the same file and CPU from
    the cache file, the others from one child each, run side by side, then stored."""
    wanted = [lib for lib in dict.fromkeys(libraries) if lib not in _FACTS_READ]
    if not wanted:
        return
    path = hostinfo.blas_cache_dir() / FACTS_FILE
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        stored = {}
    if not isinstance(stored, dict):  # a cache file of another shape is not ours: start over
        stored = {}
    stored = {stamp: facts for stamp, facts in stored.items() if isinstance(facts, dict)}
    stamps = {}
    for library in wanted:
        try:
            stamps[library] = facts_stamp(library)
        except OSError:  # no such file: the child says so (no facts)
            continue
        if stamps[library] in stored:
            _FACTS_READ[library] = stored[stamps[library]]
    unread = [lib for lib in wanted if lib not in _FACTS_READ]
    plain = [(lib, None) for lib in unread]
    facts = {lib: said for (lib, _), said in zip(plain, _children(plain), strict=True)}
    # the core each forced OPENBLAS_CORETYPE runs (a library built without a core's
    # kernels runs another: PyPI's 0.3.34 runs SkylakeX when asked for Cooperlake)
    isa = set(hostinfo.cpu_info()["isa"])
    tried = [c for c, needs in FORCED_CORES.items() if isa.issuperset(needs)]
    forced = [(lib, c) for lib in unread if (facts[lib] or {}).get("core") for c in tried]
    failed = set()  # libraries with a forced read that failed: this run drops that core
    for (lib, core), said in zip(forced, _children(forced), strict=True):
        facts[lib]["forced"] = facts[lib].get("forced", {}) | {core: (said or {}).get("core")}
        if said is None:
            failed.add(lib)
    learnt = {}
    for library in unread:
        said = facts[library]
        # a failed read is not kept (the next run reads it again)
        if said is not None and library in stamps and library not in failed:
            learnt[stamps[library]] = said
        said = {} if said is None else said
        said.setdefault("version", library.resolve().name)
        _FACTS_READ[library] = said
    if learnt:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(stored | learnt, indent=1, sort_keys=True))
            os.replace(tmp, path)
        except OSError:
            pass  # a cache: the next run reads them again


def _children(reads: list[tuple[Path, str | None]]) -> list[dict | None]:
    """What each library says of itself (_FACTS) with the core paired with it as
    OPENBLAS_CORETYPE (None: unset), from one child each, run side by side; None where
    the read failed."""
    plain = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    children: list[subprocess.Popen | None] = []
    for library, core in reads:
        env = plain | ({"OPENBLAS_CORETYPE": core} if core else {})
        try:
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", _FACTS, str(library)],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            )
        except OSError:
            children.append(None)
    said: list[dict | None] = []
    for child in children:
        facts = None
        if child is not None:
            try:
                out, _ = child.communicate(timeout=60)
                facts = json.loads(out) if child.returncode == 0 else None
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
            except ValueError:
                facts = None
        said.append(facts)
    return said


def own_core(library: Path) -> str | None:
    """The core an OpenBLAS picks by itself on this CPU; None for another library."""
    return library_facts(library).get("core") or None


def core_variants(blas: Blas) -> list[Blas]:
    """The candidates of one library: an OpenBLAS with the core it picks by itself (named
    explicitly, so the run does not depend on the caller's OPENBLAS_CORETYPE) and with each
    of FORCED_CORES the CPU can run that it did not pick and that it runs when named (its
    facts' "forced": a core it has no kernels for runs another, a twin of that one);
    any other library as it is."""
    own = own_core(blas.library)
    if own is None:
        return [blas]
    runs = library_facts(blas.library).get("forced", {})
    forced = [c for c in FORCED_CORES if (runs.get(c) or "").lower() == c.lower()]
    cores = [own, *(c for c in forced if c.lower() != own.lower())]
    return [replace(blas, coretype=c) for c in cores]


def variants(blases: list[Blas]) -> list[Blas]:
    """The candidates of several libraries (core_variants), their facts read at once."""
    read_facts([b.library for b in blases])
    return [v for b in blases for v in core_variants(b)]


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
