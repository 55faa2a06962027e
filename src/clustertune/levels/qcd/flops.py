"""QCDFlops of a ct-qcd record, one definition for every record: QCDMPI's nominal 5700
flops per heat-bath link update over the sweeps' time (seeds/003; ct-qcd since 91d10f7).

Records written before 91d10f7 store ``qcdflops_gflops`` under the same key as 5700 x
every link update, heat bath and over-relaxation alike (1.75-5x more), so a reader that
takes the stored key mixes two definitions in one column and in a "since run N" change.
Every ct-qcd record carries ``hb_link_updates_per_s``: the readers compute from it."""

from __future__ import annotations

import math

FLOPS_PER_HB_LINK = 5700


def _positive(value: object) -> float | None:
    ok = isinstance(value, int | float) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def gflops(figures: dict) -> float | None:
    """QCDFlops in Gflops over the wall time of the sweeps; None without the rate."""
    rate = _positive(figures.get("hb_link_updates_per_s"))
    return FLOPS_PER_HB_LINK * rate / 1e9 if rate else None


def compute_gflops(figures: dict) -> float | None:
    """QCDFlops over the compute time only (the slowest rank's, communication left out)."""
    total, t = gflops(figures), _positive(figures.get("time_s"))
    compute = _positive(figures.get("compute_time_s"))
    return total * t / compute if total and t and compute else None
