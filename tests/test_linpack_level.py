"""Derived figures of the Linpack level on synthetic data with known answers."""

from __future__ import annotations

import pytest

from clustertune.cluster import local_cluster
from clustertune.errors import UserError
from clustertune.levels import linpack


def test_n_for_memory_fits_and_is_a_multiple_of_nb() -> None:
    # 8 * N * (N+1) <= 0.5 * 8e8 bytes  ->  N <= 7070  ->  6912 (= 36 * 192)
    assert linpack.n_for_memory(0.5, 800_000_000, 192) == 6912
    assert linpack.n_for_memory(1.0, 8 * 101 * 102, 1) == 101
    with pytest.raises(UserError):
        linpack.n_for_memory(1.5, 10**9, 192)


def test_ranks_on_one_machine_share_its_memory() -> None:
    assert linpack.machines(local_cluster(), 8) == 1


def sample(variant: str, gflops: float, passed: object, update: list[float]) -> dict:
    return {
        "variant": variant, "n": 100, "nb": 8, "p": 1, "q": 2, "time_s": 1.0,
        "gflops": gflops, "residual": 0.01, "passed": passed, "load_imbalance": 0.1,
        "phases": {"pfact": [0.1, 0.2], "update": update},
    }  # fmt: skip


def test_derive_takes_the_best_passing_run() -> None:
    samples = [
        sample("WR00L2L2", 9.0, False, [5.0, 5.0]),  # fastest but failed: ignored
        sample("WR11C2R4", 5.0, True, [0.5, 0.7]),
        sample("WR10R2C2", 4.0, True, [0.9, 0.9]),
    ]
    figures = linpack.derive(samples, None)
    assert figures["best_variant"] == "WR11C2R4"
    assert figures["phase_max_s"] == {"pfact": 0.2, "update": 0.7}
    assert linpack.derive([sample("WR00L2L2", 9.0, False, [1.0])], None) == {}
