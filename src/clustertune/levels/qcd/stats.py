"""Error of a Monte Carlo mean with autocorrelation: the integrated autocorrelation time
with Sokal's automatic window (A. Sokal, "Monte Carlo methods in statistical mechanics",
Cargese lectures 1996: the smallest window W with W >= c tau_int(W), c = 6), and the
error sqrt(2 tau_int var / N) (docs/qcd.md). Successive plaquettes of a heat-bath chain
are correlated; the naive error sqrt(var / N) understates the real one by sqrt(2 tau)."""

from __future__ import annotations

import math
from dataclasses import dataclass

WINDOW_C = 6.0


@dataclass(frozen=True)
class Estimate:
    mean: float
    error: float  # autocorrelation-aware
    naive_error: float  # as if the values were independent
    tau_int: float  # in units of the spacing of the values (sweeps)
    n: int

    def sigmas_from(self, value: float, error: float = 0.0) -> float:
        """|mean - value| in units of the combined error."""
        return abs(self.mean - value) / math.hypot(self.error, error)


def estimate(values: list[float]) -> Estimate:
    """Mean, autocorrelation-aware error and tau_int of a series (at least 4 values)."""
    n = len(values)
    if n < 4:
        raise ValueError(f"need at least 4 values for an error estimate, got {n}")
    mean = sum(values) / n
    d = [v - mean for v in values]
    c0 = sum(x * x for x in d) / n
    var = c0 * n / (n - 1)
    tau = 0.5
    for w in range(1, n // 4 + 1):  # grow the window until W >= c tau_int(W)
        if c0 == 0.0:
            break
        tau += sum(d[i] * d[i + w] for i in range(n - w)) / (n - w) / c0
        if w >= WINDOW_C * tau:
            break
    tau = max(tau, 0.5)
    return Estimate(mean, math.sqrt(2.0 * tau * var / n), math.sqrt(var / n), tau, n)
