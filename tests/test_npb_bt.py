"""ct-npb-bt (NPB BT, block-tridiagonal ADI on a multipartition of q*q ranks) run under
mpirun with both MPIs: class S verifies against NPB's reference norms on 1 and 4 ranks
(4 oversubscribed on 2 cores) and W on 1, the norms agree across rank counts, the
messages per iteration are what the multipartition sends, the injected fault fails
verification (also stored failed through the level once BT is built there), and a class
or rank count BT cannot run is one line naming the allowed counts, exit status 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("CLUSTERTUNE_BUILD_DIR", ROOT / "build"))
MPIS = ("openmpi", "mpich")
LAUNCHERS = {
    "openmpi": ["mpirun.openmpi", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-np"],
    "mpich": ["mpiexec.mpich", "-n"],
}
S_XCR = [
    1.7034283709541311e-01,
    1.2975252070034097e-02,
    3.2527926989486055e-02,
    2.6436421275166801e-02,
    1.9211784131744430e-01,
]
S_XCE = [
    4.9976913345811579e-04,
    4.5195666782961927e-05,
    7.3973765172921357e-05,
    7.3821238632439731e-05,
    8.9269630987491446e-04,
]


def binary(mpi: str) -> Path:
    path = BUILD / mpi / "bin" / "ct-npb-bt"
    if not path.exists() or shutil.which(LAUNCHERS[mpi][0]) is None:
        pytest.skip(f"ct-npb-bt for {mpi} not built (make kernels) or launcher missing")
    return path


def launch(mpi: str, np_: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [*LAUNCHERS[mpi], str(np_), str(binary(mpi)), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def records(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]


def result(proc: subprocess.CompletedProcess) -> dict:
    found = [r for r in records(proc) if r["type"] == "result"]
    assert len(found) == 1, proc.stdout + proc.stderr
    return found[0]


def compared(res: dict) -> dict[str, dict]:
    return {c["name"]: c for c in res["figures"]["compared"]}


def bytes_per_step(n: int, q: int) -> int:
    """What the multipartition sends per step, summed over q*q ranks, when n divides
    into q cells of n/q points and every cell touches the boundary (q <= 2): per rank and
    direction two face messages (2 planes of 5 values) and q-1 forward (C' and r, 30
    values) and backward (r, 5 values) messages per line of the cell's interior face."""
    s = n // q
    face = 2 * s * s * 5 * 8 * (q - 1)
    lines = (s - 1) ** 2
    solve = (q - 1) * lines * (30 + 5) * 8
    return q * q * 3 * (2 * face + solve)


@pytest.fixture(scope="module")
def class_s() -> dict[tuple[str, int], dict]:
    """BT.S on 1 and 4 ranks with both MPIs, run once for the tests below."""
    return {(mpi, np_): result(launch(mpi, np_, "--class", "S")) for mpi in MPIS for np_ in (1, 4)}


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("np_", (1, 4))
def test_class_s_verifies(class_s, mpi: str, np_: int) -> None:
    res = class_s[(mpi, np_)]
    f = res["figures"]
    assert res["verification"] == "passed" and f["verified"] is True, res
    assert f["benchmark"] == "BT" and f["class"] == "S" and f["name"] == f"BT.S.{np_}"
    assert f["np"] == np_ == res["detail"]["ranks"] and f["cells_per_rank"] == int(np_**0.5)
    assert f["size"] == [12, 12, 12] and f["iterations"] == 60 and f["dt"] == 0.01
    c = compared(res)
    assert [c[f"xcr{m}"]["reference"] for m in range(1, 6)] == S_XCR
    assert [c[f"xce{m}"]["reference"] for m in range(1, 6)] == S_XCE
    # the tolerance is 1e-8; a correct BT lands within rounding of the references
    assert all(x["passed"] and x["rel_error"] < 1e-11 for x in c.values()), c
    ops = 60 * (3478.8 * 12**3 - 17655.7 * 12**2 + 28023.7 * 12)
    assert f["mops_total"] == pytest.approx(ops / f["time_s"] / 1e6)
    assert f["mops_per_process"] == pytest.approx(f["mops_total"] / np_)
    assert f["op_type"] == "floating point" and f["tolerance"] == 1e-8
    assert len(f["comp_time_s_per_rank"]) == np_ == len(f["comm_time_s_per_rank"])
    assert f["comp_time_s"] == max(f["comp_time_s_per_rank"]) > 0
    # per rank and step: 6 face messages, and 2 (q-1) per direction in the sweeps
    q = int(np_**0.5)
    assert f["messages_per_iteration"] == (0 if q == 1 else np_ * (6 + 3 * 2 * (q - 1)))
    assert f["bytes_per_iteration"] == bytes_per_step(12, q)


def test_norms_agree_across_rank_counts_and_mpis(class_s) -> None:
    base = compared(class_s[("openmpi", 1)])
    for key, res in class_s.items():
        for name, c in compared(res).items():
            assert c["value"] == pytest.approx(base[name]["value"], rel=1e-12), (key, name)


def test_class_w_verifies_on_one_rank() -> None:
    res = result(launch("openmpi", 1, "--class", "W", timeout=180))
    f = res["figures"]
    assert res["verification"] == "passed", res
    assert f["size"] == [24, 24, 24] and f["iterations"] == 200 and f["dt"] == 0.0008
    assert f["messages_per_iteration"] == 0 == f["bytes_per_iteration"]
    assert all(c["rel_error"] < 1e-11 for c in f["compared"])


@pytest.mark.parametrize("mpi, np_", [("openmpi", 1), ("mpich", 4)])
def test_injected_fault_fails_verification(mpi: str, np_: int) -> None:
    proc = launch(mpi, np_, "--class", "S", "--inject-fault")
    res = result(proc)
    assert res["verification"] == "failed" and res["figures"]["verified"] is False
    assert proc.returncode != 0  # the job fails with its verification
    c = compared(res)
    assert not any(x["passed"] for x in c.values())  # one value moves every norm
    assert all(x["rel_error"] > 1e-6 for x in c.values())


def test_check_only_names_the_allowed_counts() -> None:
    exe = str(binary("openmpi"))
    for np_ in (1, 4, 9, 16):
        ok = subprocess.run(
            [exe, "--class", "S", "--check-only", "--np", str(np_)], capture_output=True, text=True
        )
        assert ok.returncode == 0 and ok.stdout == ok.stderr == "", ok
    for cls, np_, counts in (
        ("S", 2, "1, 4, 9, 16 ranks"),
        ("S", 25, "1, 4, 9, 16 ranks"),
        ("W", 5, "1, 4, 9, 16, 25, 36, 49, 64 ranks"),
    ):
        bad = subprocess.run(
            [exe, "--class", cls, "--check-only", "--np", str(np_)], capture_output=True, text=True
        )
        assert bad.returncode == 2 and bad.stdout == "", bad
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and f"--np {np_}: BT.{cls} runs on {counts}" in lines[0], lines
        assert "square" in lines[0]
    bad = subprocess.run(
        [exe, "--class", "E", "--check-only", "--np", "4"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--class" in bad.stderr


@pytest.mark.parametrize("mpi", MPIS)
def test_a_count_that_is_not_square_stops_before_any_work(mpi: str) -> None:
    proc = launch(mpi, 2, "--class", "S", timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    recs = records(proc)
    assert [r["type"] for r in recs] == ["error"], recs
    assert "--np 2: BT.S runs on 1, 4, 9, 16 ranks" in recs[0]["message"]


def test_through_the_level_the_fault_is_stored_failed(store) -> None:
    from clustertune.cluster import local_cluster
    from clustertune.levels.npb import run as npbrun

    good = npbrun.run_npb(local_cluster(), store, "bt", "S", 4, "openmpi", timeout=120)
    assert good["status"] == "ok" and good["verification"] == "passed", good["error"]
    assert good["figures"]["name"] == "BT.S.4"
    bad = npbrun.run_npb(local_cluster(), store, "bt", "S", 1, "mpich", inject_fault=True)
    assert bad["status"] == "failed" and store.get(bad["id"])["status"] == "failed"
    assert "UNSUCCESSFUL" in npbrun.text(bad) and "FAILED (verification)" in npbrun.text(bad)


def test_bench_script_drives_the_shared_bench_with_bt_cases() -> None:
    import importlib.util

    path = ROOT / "bench" / "npb_bt_vs_official.py"
    spec = importlib.util.spec_from_file_location("npb_bt_vs_official", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.cases_of(["--repeat", "3"]) == "bt.A.1,bt.A.4"
    assert bench.cases_of(["--cases", "bt.W.1"]) == bench.cases_of(["--cases=bt.W.1"]) == "bt.W.1"
    shared = bench.shared_bench()
    assert shared.OURS["bt"] == "ct-npb-bt" and callable(shared.main)
