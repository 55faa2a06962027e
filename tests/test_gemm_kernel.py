"""ct-gemm run directly under mpirun on both MPIs: a normal run passes and exits 0, a
corrupted entry fails the run (result line and exit status), the sampled entries change
from one product to the next, and --check-only validates the flags without MPI."""

from __future__ import annotations

import pytest
from test_linpack_kernel import check_only, mpirun, records_of

MPIS = ["openmpi", "mpich"]


def launch(mpi: str, np: int, *args: str) -> tuple[int, list[dict]]:
    proc = mpirun(mpi, np, "ct-gemm", list(args), timeout=120)
    return proc.returncode, records_of(proc)


def of_type(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["type"] == kind]


@pytest.mark.parametrize("np,grid", [(2, ["-P", "1", "-Q", "2"]), (4, ["-P", "2", "-Q", "2"])])
@pytest.mark.parametrize("mpi", MPIS)
def test_normal_run_passes(mpi: str, np: int, grid: list[str]) -> None:
    rc, records = launch(mpi, np, "-N", "60,37", "--nb", "8", *grid, "--type", "sdcz")
    assert rc == 0, records
    samples = of_type(records, "sample")
    assert len(samples) == 8 and all(s["passed"] for s in samples)
    for s in samples:
        for phase in ("bcast", "gemm"):
            st = s["phase_stats"][phase]
            assert 0 <= st["min"] <= st["mean"] <= st["max"]
    (result,) = of_type(records, "result")
    assert result["verification"] == "passed"
    assert result["detail"]["ranks"] == np and result["detail"]["mpi_library"]


@pytest.mark.parametrize("mode", [["-P", "2", "-Q", "2"], ["--local"]])
@pytest.mark.parametrize("mpi", MPIS)
def test_corrupted_entry_fails_the_run(mpi: str, mode: list[str]) -> None:
    """One entry of the first product, on the last rank, is off: that product fails, the
    others pass, the result says failed and the exit status is not 0."""
    rc, records = launch(
        mpi, 4, "-N", "48", "--nb", "8", *mode, "--type", "dz", "--repeat", "2", "--inject-fault"
    )
    assert rc == 1, records
    assert [s["passed"] for s in of_type(records, "sample")] == [False, True, True, True]
    assert of_type(records, "result")[0]["verification"] == "failed"


@pytest.mark.parametrize("mpi", MPIS)
def test_rank_k_products_are_checked_and_counted_at_their_depth(mpi: str) -> None:
    """--local --k: each rank's C (n x n) += A (n x K) B (K x n), the LU update's shape:
    checked against the generator at depth K (a corrupted entry fails), 2 n n K flops per
    rank, a CPU-time rate beside the wall-clock one, and only square products count
    as the DGEMM peak."""
    rc, records = launch(mpi, 2, "-N", "64", "--local", "--k", "8,100", "--type", "d")
    assert rc == 0, records
    samples = of_type(records, "sample")
    assert [s["k"] for s in samples] == [8, 100] and all(s["passed"] for s in samples)
    assert [s["flops"] for s in samples] == [2.0 * 64 * 64 * k * 2 for k in (8, 100)]
    assert all(s["cpu_s"] > 0 and s["cpu_gflops"] > 0 for s in samples)
    assert of_type(records, "result")[0]["figures"]["best_dgemm_gflops"] == 0.0
    rc, records = launch(mpi, 2, "-N", "64", "--local", "--k", "8", "--type", "d", "--inject-fault")
    assert rc == 1 and not of_type(records, "sample")[0]["passed"]


@pytest.mark.parametrize("mpi", MPIS)
def test_rank_k_needs_local(mpi: str) -> None:
    proc = check_only(mpi, "--np", "2", "-N", "64", "--k", "8", kernel="ct-gemm")
    assert proc.returncode == 2 and "--k: needs --local" in proc.stderr


def test_sampled_entries_change_with_every_repeat() -> None:
    """Above --check-all 64 entries per rank are checked, drawn anew for every product: the
    worst error among them differs between repeats (the same entries would give the same)."""
    rc, records = launch(
        "openmpi",
        2,
        "-N",
        "96",
        "--nb",
        "8",
        "-P",
        "1",
        "-Q",
        "2",
        "--type",
        "s",
        "--repeat",
        "6",
        "--check-all",
        "0",
    )
    assert rc == 0
    worst = [s["error_over_tolerance"] for s in of_type(records, "sample")]
    assert len(worst) == 6 and len(set(worst)) > 1, worst


@pytest.mark.parametrize(
    "args,line",
    [
        (["--np", "4", "-N", "100,200", "-P", "2", "-Q", "2", "--type", "dz"], None),
        (["--np", "3", "--local", "-N", "100"], None),
        (
            ["--np", "3", "-P", "2", "-Q", "2"],
            "-P/-Q: grid 2 x 2 (P*Q=4) needs more than the 3 processes available",
        ),
        (
            ["--np", "4", "-N", "-5"],
            "-N: expected a comma-separated list of up to 20 integers >= 0, got '-5'",
        ),
        (
            ["--np", "4", "--type", "dq"],
            "--type: expected 1 to 4 of the letters s, d, c, z, got 'dq'",
        ),
        (["--np", "4", "--repeat", "0"], "--repeat: expected a positive integer, got '0'"),
        (["--np", "4", "--nb"], "--nb needs a value (see --help)"),
        (["--np", "4", "extra"], "unexpected argument 'extra' (see --help)"),
    ],
)
@pytest.mark.parametrize("mpi", MPIS)
def test_check_only(mpi: str, args: list[str], line: str | None) -> None:
    proc = check_only(mpi, *args, kernel="ct-gemm")
    assert proc.stdout == ""
    if line is None:
        assert (proc.returncode, proc.stderr) == (0, "")
    else:
        assert proc.returncode == 2 and proc.stderr.splitlines() == [f"ct-gemm: {line}"]
