"""ct-linpack run directly under mpirun: every variant's residual check passes at tiny N,
solutions agree across process grids, a corrupted factorisation fails the check, the
seeds' HPL.dat files parse as HPL reads them, and bad input names its line. A failed
allocation stops every rank without a result, a combination too large for memory is
skipped, and --check-only validates the arguments without starting MPI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).with_name("test_linpack_data")

# Every panel factorisation, recursive variant, broadcast and look-ahead depth.
ALL_VARIANTS = [
    "--pfact",
    "L,C,R",
    "--rfact",
    "L,C,R",
    "--bcast",
    "0,1,2,3,4,5",
    "--depth",
    "0,1,2",
    "--nbmin",
    "2",
    "--ndiv",
    "2",
]
# Tiny N with a block size that leaves a partial last block; non-square grids included.
GRIDS = {1: ([1], [1]), 2: ([1, 2], [2, 1]), 4: ([2, 1, 4], [2, 4, 1]), 6: ([2, 3, 1], [3, 2, 6])}
LAUNCHERS = {
    "openmpi": ["mpirun.openmpi", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-np"],
    "mpich": ["mpiexec.mpich", "-n"],
}


def binary(mpi: str, kernel: str = "ct-linpack") -> Path:
    path = ROOT / "build" / mpi / "bin" / kernel
    if not path.exists() or shutil.which(LAUNCHERS[mpi][0]) is None:
        pytest.skip(f"{kernel} for {mpi} not built (make kernels) or launcher missing")
    return path


def mpirun(
    mpi: str, np: int, kernel: str, args: list[str], timeout: float, extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", **(extra_env or {}))
    # a core every AVX2 machine runs correctly: these tests check the kernel, not the BLAS
    # (a run through clustertune gets the host's measured choice, levels/linpack/choice.py)
    env.setdefault("OPENBLAS_CORETYPE", "Haswell")
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [*LAUNCHERS[mpi], str(np), str(binary(mpi, kernel)), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def launch(
    mpi: str, np: int, args: list[str], timeout: float, extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    return mpirun(mpi, np, "ct-linpack", ["--hpl-out", "-", *args], timeout, extra_env)


def records_of(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def run(mpi: str, np: int, args: list[str], timeout: float = 120) -> tuple[list[dict], str]:
    proc = launch(mpi, np, args, timeout)
    return records_of(proc), proc.stderr


def samples(records: list[dict]) -> list[dict]:
    return [r for r in records if r["type"] == "sample"]


def result(records: list[dict]) -> dict:
    results = [r for r in records if r["type"] == "result"]
    assert len(results) == 1, records
    return results[0]


def grid_args(np: int) -> list[str]:
    ps, qs = GRIDS[np]
    return ["-P", ",".join(map(str, ps)), "-Q", ",".join(map(str, qs))]


def assert_all_passed(records: list[dict], expected: int) -> None:
    res = result(records)
    assert res["verification"] == "passed", res
    assert res["figures"]["passed"] == expected == len(samples(records))
    for s in samples(records):
        assert s["passed"] is True and s["residual"] < s["threshold"], s


def agree(values: list[float]) -> bool:
    scale = max(1.0, max(abs(v) for v in values))
    return max(values) - min(values) <= 1e-9 * scale


# The row-swap algorithm (SWAP) only runs on grids of several process rows: a grid of one
# row swaps locally whatever SWAP says, so its variants run once, with bin-exch (and one
# rank, whose only grid is 1 x 1, runs no other SWAP).
SWAP_CASES = [(np, swap) for np in GRIDS for swap in ("0", "1", "2") if swap == "0" or np > 1]


def swap_grid_args(np: int, swap: str) -> tuple[list[str], int]:
    """-P/-Q of the grids of np ranks that this SWAP exercises, and how many there are."""
    grids = [(p, q) for p, q in zip(*GRIDS[np], strict=True) if swap == "0" or p > 1]
    ps, qs = (",".join(str(g[i]) for g in grids) for i in (0, 1))
    return ["-P", ps, "-Q", qs], len(grids)


@pytest.mark.parametrize("np,swap", SWAP_CASES)
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_every_variant_passes(mpi: str, np: int, swap: str) -> None:
    # one job runs the whole product (3 grids x 162 variants on 4 and 6 ranks); MPICH's
    # ranks keep up on 2 cores because the kernel waits only in its own yielding loop
    grid, ngrids = swap_grid_args(np, swap)
    args = ["-N", "37", "--nb", "4", *grid, *ALL_VARIANTS]
    args += ["--swap", swap, "--swap-threshold", "6"]
    records, stderr = run(mpi, np, args, timeout=240)
    assert_all_passed(records, 3 * 3 * 6 * 3 * ngrids)
    assert agree([s["x_sum"] for s in samples(records)])
    assert "PASSED" in stderr and "FAILED" not in stderr


def test_solution_independent_of_grid_and_block_size() -> None:
    args = ["-N", "50", "--nb", "3,8,50,64", *grid_args(6), "--pmap", "col"]
    records, _ = run("openmpi", 6, args)
    assert_all_passed(records, 4 * 3)
    assert agree([s["x_sum"] for s in samples(records)])


def test_injected_fault_fails_the_check() -> None:
    records, stderr = run(
        "openmpi", 2, ["-N", "64", "--nb", "8", "-P", "1", "-Q", "2", "--inject-fault"]
    )
    res = result(records)
    assert res["verification"] == "failed"
    assert samples(records)[0]["passed"] is False
    assert "FAILED" in stderr


def test_illegal_grid_is_skipped_with_reason() -> None:
    records, stderr = run("openmpi", 2, ["-N", "40", "--nb", "8", "-P", "1,2", "-Q", "2,2"])
    res = result(records)
    assert res["figures"] == res["figures"] | {"tests": 2, "passed": 1, "skipped": 1}
    assert "P*Q=4" in res["detail"]["skipped"][0]
    assert "skipped because of illegal input values" in stderr


def test_nothing_ran_is_an_error_not_a_result() -> None:
    proc = launch("openmpi", 2, ["-N", "40", "--nb", "8", "-P", "2", "-Q", "2"], 120)
    records = records_of(proc)
    assert proc.returncode != 0
    assert result(records)["figures"]["skipped"] == 1
    errors = [r["message"] for r in records if r["type"] == "error"]
    assert len(errors) == 1 and "no combination ran (1 of 1 skipped)" in errors[0], errors
    assert "P*Q=4" in errors[0]


@pytest.mark.parametrize(
    "name,depths,swap,bcast,rfact",
    [
        # the BCAST comment wrapped onto the depth-count line: "5=LnM)" reads as 5 depths
        ("seed000_fig11.dat", [1, 0, 0, 0, 0], "mix", "1ring", "right"),
        ("seed000_fig12.dat", [0, 0, 0, 0, 0], "mix", "longM", "left"),
        # an extra "5=LnM)" line shifts every later line by one, as HPL would read it
        ("seed001_fig9.dat", [1, 0, 0, 0, 0], "long", "1ring", "right"),
        ("seed001_fig10.dat", [1, 0, 0, 0, 0], "bin-exch", "longM", "left"),
    ],
)
def test_seed_hpl_dat_parse_as_printed(
    name: str, depths: list[int], swap: str, bcast: str, rfact: str
) -> None:
    records, _ = run("openmpi", 8, ["--dat", str(DATA / name), "-N", "300"])
    assert_all_passed(records, 5)
    runs = samples(records)
    assert [s["depth"] for s in runs] == depths
    assert {(s["p"], s["q"], s["nb"], s["swap"], s["bcast"], s["rfact"]) for s in runs} == {
        (2, 4, 72, swap, bcast, rfact)
    }
    warnings = result(records)["detail"]["warnings"]
    assert any(":23:" in w and "5=LnM)" in w for w in warnings)
    assert any(":9:" in w and "HPL 1.x layout" in w for w in warnings)


def bad_hpl_dat(tmp_path: Path) -> Path:
    """seed000_fig11.dat with NDIV 1 on line 18 (HPL wants at least 2)."""
    text = (DATA / "seed000_fig11.dat").read_text().splitlines()
    assert text[17].split()[1] == "NDIVs"
    text[17] = "1            NDIVs"
    bad = tmp_path / "bad-HPL.dat"
    bad.write_text("\n".join(text) + "\n")
    return bad


def truncated_hpl_dat(tmp_path: Path) -> Path:
    """seed000_fig11.dat cut after line 12."""
    short = tmp_path / "short-HPL.dat"
    short.write_text("\n".join((DATA / "seed000_fig11.dat").read_text().splitlines()[:12]) + "\n")
    return short


def test_bad_hpl_dat_line_is_named(tmp_path: Path) -> None:
    bad = bad_hpl_dat(tmp_path)
    records, stderr = run("openmpi", 1, ["--dat", str(bad)])
    errors = [r for r in records if r["type"] == "error"]
    assert errors and f"{bad}:18:" in errors[0]["message"] and "NDIV" in errors[0]["message"]
    assert not [r for r in records if r["type"] == "result"]


def test_truncated_hpl_dat_is_named(tmp_path: Path) -> None:
    short = truncated_hpl_dat(tmp_path)
    records, _ = run("openmpi", 1, ["--dat", str(short)])
    errors = [r for r in records if r["type"] == "error"]
    assert errors and f"{short}:13:" in errors[0]["message"]


def test_record_names_the_blas_that_ran() -> None:
    records, _ = run("openmpi", 1, ["-N", "30", "--nb", "8"])
    blas = result(records)["detail"]["blas"]
    assert blas["library"]
    if "openblas" in blas["library"]:
        assert blas["core"]


def test_phase_stats_summarise_the_ranks() -> None:
    records, _ = run("mpich", 4, ["-N", "64", "--nb", "8", "-P", "2", "-Q", "2"])
    sample = samples(records)[0]
    for phase, per_rank in sample["phases"].items():
        stats = sample["phase_stats"][phase]
        assert len(per_rank) == 4
        assert stats["min"] == min(per_rank) and stats["max"] == max(per_rank)
        assert stats["mean"] == pytest.approx(sum(per_rank) / 4)
    assert "MPICH" in result(records)["detail"]["mpi_library"]


@pytest.mark.parametrize("np,p,q", [(2, 1, 2), (4, 2, 2)])
def test_phase_parts_account_for_the_update(np: int, p: int, q: int) -> None:
    """The parts of the update (issue 23 item 4's breakdown) cover every trailing-update
    DGEMM exactly once (its flops summed over ranks are the LU's update flops), lie inside
    the update, and the disjoint phases fit inside each rank's LU time."""
    n, nb = 300, 32  # a partial last block
    records, err = run("openmpi", np, ["-N", str(n), "--nb", str(nb), "-P", str(p), "-Q", str(q)])
    sample = samples(records)[0]
    assert sample["passed"] is True, err
    parts = sample["phase_parts"]
    assert set(parts) == {"dtrsm", "dgemm", "lookahead", "lu", "lu_cpu"}
    expected = 0.0
    for jj in range(0, n, nb):
        below = n - min(jj + nb, n)  # rows below the panel; the b column is updated too
        expected += 2.0 * below * (below + 1) * min(nb, n - jj)
    assert sum(sample["update_dgemm_flops"]) == pytest.approx(expected, rel=1e-12)
    for r in range(np):
        phases = {name: per_rank[r] for name, per_rank in sample["phases"].items()}
        assert parts["dtrsm"][r] + parts["dgemm"][r] <= phases["update"] + 1e-9
        assert sum(phases.values()) <= parts["lu"][r] + 1e-9
        assert parts["lu"][r] <= sample["time_s"] + 1e-9
        assert sample["update_dgemm_gflops"][r] > 0
        assert parts["lu_cpu"][r] > 0
    # with look-ahead depth 1 (the default) every panel after the first is factored by a
    # process column that first brought its block up to date
    assert all(parts["lookahead"][r] > 0 for r in range(np))


@pytest.mark.parametrize("np,grid", [(2, ["-P", "1", "-Q", "2"]), (4, ["-P", "2", "-Q", "2"])])
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_failed_allocation_stops_every_rank(mpi: str, np: int, grid: list[str]) -> None:
    """The last rank's panel allocation fails. With a negative threshold no residual check
    would catch what a factorisation without panels computed: nothing may be reported."""
    failing = np - 1
    args = ["-N", "64", "--nb", "8", *grid, "--threshold", "-1"]
    proc = launch(mpi, np, [*args, "--inject-alloc-failure", str(failing)], timeout=60)
    records = records_of(proc)
    assert proc.returncode != 0
    assert not [r for r in records if r["type"] != "error"], records
    errors = [r["message"] for r in records]
    assert len(errors) == 1, errors
    why = rf"rank {failing}: cannot allocate the panel buffers \(\d+ bytes\)"
    assert re.fullmatch(f"ct-linpack: {why}", errors[0]), errors
    for rank in range(failing):  # every other rank says why it stops
        assert re.search(f"ct-linpack: rank {rank}: stopping, {why}", proc.stderr), proc.stderr


def test_combination_too_large_for_memory_is_skipped() -> None:
    """Matrix, panels and work buffers are counted before anything is allocated."""
    records, _ = run("openmpi", 2, ["-N", "40,3000000", "--nb", "8", "-P", "2", "-Q", "1"])
    res = result(records)
    assert res["figures"] == res["figures"] | {"tests": 2, "passed": 1, "skipped": 1}
    skipped = res["detail"]["skipped"][0]
    assert "N=3000000" in skipped and "does not fit in memory" in skipped
    assert re.search(r"matrix [\d.]+, panels [\d.]+, work [\d.]+ MB", skipped), skipped
    assert [s["n"] for s in samples(records)] == [40]


# MPI_Init fails under either MPI with these, so a --check-only that exits 0 silently, or
# prints only its one line, did not start MPI.
NO_MPI = {"OMPI_MCA_pml": "no-such-pml", "MPIR_CVAR_DEFAULT_THREAD_LEVEL": "no-such-level"}


def check_only(
    mpi: str, *args: str, kernel: str = "ct-linpack", extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    cmd = [str(binary(mpi, kernel)), "--check-only", *args]
    env = dict(os.environ, **NO_MPI, **(extra_env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_check_only_passes_what_a_run_accepts(mpi: str) -> None:
    for args in (
        ["--np", "4", "-N", "100", "--nb", "8", "-P", "1,2", "-Q", "4,2", "--pfact", "L,c,2"],
        ["--np", "8", "--dat", str(DATA / "seed000_fig11.dat"), "-N", "300"],
    ):
        proc = check_only(mpi, *args)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), args


@pytest.mark.parametrize(
    "args,line",
    [
        (
            ["--np", "4", "-N", "-5"],
            "-N: expected a comma-separated list of up to 20 integers >= 0, got '-5'",
        ),
        (
            ["--np", "3", "-P", "2", "-Q", "2"],
            "-P/-Q: grid 2 x 2 (P*Q=4) needs more than the 3 processes available",
        ),
        (
            ["--np", "4", "--nb", "8,x"],
            "--nb: expected a comma-separated list of up to 20 integers >= 1, got '8,x'",
        ),
        (["--np", "4", "--swap", "3"], "--swap: expected an integer from 0 to 2, got '3'"),
        (["--np", "4", "--frobnicate", "1"], "unknown option '--frobnicate' (see --help)"),
        (["--np", "4", "-P", "2"], "-P/-Q: give both, with as many values each"),
        (["--np", "0"], "--np: expected a positive integer, got '0'"),
        (["-N", "10"], "--check-only needs --np N, the number of ranks the run will have"),
        (
            ["--np", "4", "--dat", str(DATA / "seed000_fig11.dat")],
            f"{DATA / 'seed000_fig11.dat'}:10-11: grid 2 x 4 (P*Q=8) needs more than the 4 "
            "processes available",
        ),
    ],
)
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_check_only_names_the_problem_in_one_line(mpi: str, args: list[str], line: str) -> None:
    proc = check_only(mpi, *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"ct-linpack: {line}"]


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_check_only_names_the_bad_hpl_dat_line(mpi: str, tmp_path: Path) -> None:
    bad, short = bad_hpl_dat(tmp_path), truncated_hpl_dat(tmp_path)
    for dat, where in ((bad, ":18: value of NDIV is 1"), (short, ":13: unexpected end of file")):
        proc = check_only(mpi, "--np", "8", "--dat", str(dat))
        assert proc.returncode == 2 and proc.stdout == ""
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"ct-linpack: {dat}{where}"), lines


@pytest.mark.parametrize("chunk", ["abc", "0", "-5", "12x", "", "99999999999"])
def test_bad_update_chunk_is_refused(chunk: str) -> None:
    # CT_LINPACK_CHUNK (columns per piece of a bulk update) was read with atoi: 'abc' ran
    # with pieces of NB columns and said nothing
    env = {"CT_LINPACK_CHUNK": chunk}
    line = f"ct-linpack: CT_LINPACK_CHUNK: expected a number of columns >= 1, got '{chunk}'"
    proc = check_only("openmpi", "--np", "2", "-N", "64", extra_env=env)
    assert (proc.returncode, proc.stdout, proc.stderr.splitlines()) == (2, "", [line])
    run_proc = launch("openmpi", 2, ["-N", "64", "--nb", "8", "-P", "1", "-Q", "2"], 120, env)
    assert run_proc.returncode != 0 and not samples(records_of(run_proc))
    assert line in run_proc.stderr


def test_update_chunk_splits_the_bulk_update_and_keeps_the_solution() -> None:
    # pieces of 8 columns on a 1 x 4 ring (where the bulk update is cut anyway) and on
    # 1 x 2 (where it is one DGEMM unless the variable asks): same solution, every check passed
    args = ["-N", "96", "--nb", "8", "-P", "1,1", "-Q", "4,2", "--bcast", "0"]
    sums = []
    for env in (None, {"CT_LINPACK_CHUNK": "8"}):
        records = records_of(launch("openmpi", 4, args, 120, env))
        assert_all_passed(records, 2)
        sums += [s["x_sum"] for s in samples(records)]
    assert agree(sums)
