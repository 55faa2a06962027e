"""The search space of the Linpack tuner and the choices derived from measurements,
without running anything (tests/test_tune.py checks them on synthetic inputs).

A configuration is what an HPL.dat fixes for one run (N aside) plus what the launch
fixes: BLAS library, ranks and BLAS threads per rank. The kernel's own option table
(kernels/linpack/linpack.c) defines the searched dimensions: NB, P x Q, DEPTH, BCAST
0-5, SWAP 0-2, PFACT/RFACT L/C/R, NBMIN (NDIV kept at 2, PMAP row-major, swapping
threshold 64: HPL's defaults).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

# sample field values (kernels/linpack/lp_out.c) -> the HPL.dat codes
FACTS = ("left", "crout", "right")
BCASTS = ("1ring", "1ringM", "2ring", "2ringM", "long", "longM")
SWAPS = ("bin-exch", "long", "mix")
FACT_LETTERS = "LCR"

# searched values of each algorithmic dimension, in the order coordinate descent visits
# them (the ones that move the rate most first)
DIMENSIONS: dict[str, tuple[int, ...]] = {
    "depth": (0, 1, 2),
    "bcast": (0, 1, 2, 3, 4, 5),
    "swap": (0, 1, 2),
    "pfact": (0, 1, 2),
    "rfact": (0, 1, 2),
    "nbmin": (2, 4, 8),
}
# the kernel flag of each dimension (linpack.c option table)
FLAGS = {
    "nb": "--nb",
    "depth": "--depth",
    "bcast": "--bcast",
    "swap": "--swap",
    "pfact": "--pfact",
    "rfact": "--rfact",
    "nbmin": "--nbmin",
    "ndiv": "--ndiv",
}
# a rate within this of another counts as equal even when its samples agree closely
NOISE = 0.02


@dataclass(frozen=True)
class Config:
    blas: str  # the BLAS candidate's key: its directory (LD_LIBRARY_PATH)[#OpenBLAS core]
    ranks: int
    threads: int
    nb: int = 192
    p: int = 1
    q: int = 1
    depth: int = 1
    bcast: int = 1
    swap: int = 2
    pfact: int = 2
    rfact: int = 1
    nbmin: int = 4
    ndiv: int = 2

    def kernel_args(self, n: int) -> list[str]:
        out = ["-N", str(n), "-P", str(self.p), "-Q", str(self.q)]
        for key, flag in FLAGS.items():
            out += [flag, str(getattr(self, key))]
        return out + ["--swap-threshold", "64"]

    def key(self) -> tuple:
        return tuple(asdict(self).values())

    def code(self) -> str:
        """HPL's variant code (docs/linpack.md), e.g. WR11C2R4."""
        return (
            f"WR{self.depth}{self.bcast}{FACT_LETTERS[self.rfact]}{self.ndiv}"
            f"{FACT_LETTERS[self.pfact]}{self.nbmin}"
        )


def from_sample(base: Config, sample: dict) -> Config:
    """The configuration a ct-linpack sample measured (launch fields from ``base``)."""
    return replace(
        base,
        nb=sample["nb"],
        p=sample["p"],
        q=sample["q"],
        depth=sample["depth"],
        bcast=BCASTS.index(sample["bcast"]),
        swap=SWAPS.index(sample["swap"]),
        pfact=FACTS.index(sample["pfact"]),
        rfact=FACTS.index(sample["rfact"]),
        nbmin=sample["nbmin"],
        ndiv=sample["ndiv"],
    )


def grids(np: int) -> list[tuple[int, int]]:
    """P x Q = np: the squarest with P <= Q first, then its neighbours (the next flatter
    one, and the transposed square-most one when P < Q) - seeds/000 table 5's shapes."""
    pairs = [(p, np // p) for p in range(1, np + 1) if np % p == 0]
    flat = [g for g in pairs if g[0] <= g[1]]
    best = flat[-1]
    out = [best]
    i = flat.index(best)
    if i > 0:
        out.append(flat[i - 1])
    if best[0] < best[1]:
        out.append((best[1], best[0]))
    return out


def layouts(np: int, cores_per_host: int, hosts: int) -> list[tuple[int, int]]:
    """(ranks, BLAS threads per rank) that use ``np`` cores: all ranks single-threaded
    (HPL's usual choice), or fewer ranks with threads, as long as one rank's threads fit
    on one host (seeds/000 table 6: 1 CPU x 2 nodes against 2 CPUs x 1 node)."""
    out = [(np, 1)]
    for t in range(2, min(np, cores_per_host) + 1):
        if np % t == 0:
            out.append((np // t, t))
    return out


def n_for_time(gflops: float, seconds: float, step: int, n_max: int, n_min: int) -> int:
    """The N (a multiple of ``step``) whose LU takes about ``seconds`` at ``gflops``."""
    n = int((1.5 * gflops * 1e9 * seconds) ** (1.0 / 3.0))
    n = min(n, n_max)
    return max(n_min, n // step * step)


@dataclass(frozen=True)
class Measured:
    """One configuration's samples (rates, Gflop/s)."""

    cfg: Config
    rates: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    @property
    def spread(self) -> float:
        """Median absolute deviation: one load spike among several samples does not
        widen it, two samples give half their distance."""
        m = self.median
        return statistics.median(abs(r - m) for r in self.rates)

    def text(self) -> str:
        return f"{self.median:.1f} +- {self.spread:.1f} Gflop/s ({len(self.rates)} samples)"


def measured(trials: list[tuple[Config, float]]) -> list[Measured]:
    """Distinct configurations with all their samples, best median first."""
    rates: dict[tuple, tuple[Config, list[float]]] = {}
    for cfg, rate in trials:
        rates.setdefault(cfg.key(), (cfg, []))[1].append(rate)
    return sorted((Measured(c, tuple(r)) for c, r in rates.values()), key=lambda m: -m.median)


def beats(a: Measured, b: Measured) -> bool:
    """``a`` is faster than ``b`` beyond the noise measured for them: the medians differ
    by more than twice the larger spread (and more than NOISE). Otherwise the two are
    equal on this evidence and the choice between them is not decided by the rates."""
    margin = max(NOISE * b.median, 2.0 * max(a.spread, b.spread))
    return a.median - b.median > margin


def keep_incumbent(best: Measured, incumbent: Measured | None) -> Measured:
    """The incumbent (the usual or earlier-decided value; None: not measured) unless
    ``best`` beats it beyond the noise: what the rates do not decide keeps it."""
    if incumbent is None or best is incumbent or beats(best, incumbent):
        return best
    return incumbent


def samples_for(n: int, gflops: float, seconds: float, most: int) -> int:
    """Samples of an LU at ``n`` that fill a launch of about ``seconds`` at ``gflops``
    (at least 1, at most ``most``)."""
    one = (2.0 / 3.0) * n**3 / (max(gflops, 1e-3) * 1e9)
    return max(1, min(most, math.ceil(seconds / one)))
