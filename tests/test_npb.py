"""The NPB level (EP, LU): kernels verified against NPB's reference values on 1, 2 and 4
ranks with both MPIs, the injected fault stored as failed, bad class or count refused
before launch, NPB's text from the record, the report section and the demo step."""

from __future__ import annotations

import subprocess
import time

import pytest
from clirun import assert_refused_before_launch

from clustertune import kernels, report
from clustertune.cluster import local_cluster
from clustertune.errors import UserError
from clustertune.levels.npb import paper, section
from clustertune.levels.npb import run as npbrun

MPIS = ("openmpi", "mpich")


def synthetic(verified: bool, **figures) -> dict:
    f = {
        "benchmark": "LU",
        "class": "A",
        "np": 4,
        "name": "LU.A.4",
        "size": [64, 64, 64],
        "iterations": 250,
        "time_s": 10.0,
        "mops_total": 11424.13,
        "mops_per_process": 2856.03,
        "op_type": "floating point",
        "verified": verified,
        "compared": [
            {
                "name": "xcr1",
                "value": 779.02,
                "reference": 779.021,
                "rel_error": 1.3e-6,
                "passed": verified,
            },
            {"name": "xci", "value": None, "reference": 26.03, "rel_error": None, "passed": False},
        ],
        "comp_time_s": 9.0,
        "comm_time_s": 1.0,
        "messages_per_iteration": 1234,
        "bytes_per_iteration": 56789,
    } | figures
    return {
        "id": 3,
        "kernel": "ct-npb-lu",
        "level": "npb",
        "status": "ok" if verified else "failed",
        "verification": "passed" if verified else "failed",
        "figures": f,
        "detail": {"mpi_library": "Open MPI v4.1.4, package: Debian OpenMPI"},
        "error": None,
        "meta": {"mpi": {"flavour": "openmpi"}, "cluster": {"name": "vc"}, "np": 4},
    }


def block_of(text: str) -> dict[str, str]:
    return {
        ln.split("=")[0].strip(): ln.split("=", 1)[1].strip()
        for ln in text.splitlines()
        if "=" in ln
    }


def test_npb_text_is_rendered_from_the_record() -> None:
    text = npbrun.text(synthetic(True))
    block = block_of(text)
    assert " LU Benchmark Completed." in text.splitlines()
    assert block["Size"] == "64x  64x  64"
    assert block["Mop/s total"] == "11424.13" and block["Mop/s/process"] == "2856.03"
    assert block["Verification"] == "SUCCESSFUL" and block["MPI"] == "Open MPI v4.1.4"
    assert block["Operation type"] == "floating point" and block["Iterations"] == "250"
    failed = npbrun.text(synthetic(False))
    assert "UNSUCCESSFUL" in failed and "FAILED" in failed and "n/a" in failed


def test_a_failed_run_shows_no_time_or_rate() -> None:
    """A run that fails verification is reported as failed, never as a number: the block
    says FAILED and why where the time and rates would be; class, size and np stay."""
    text = npbrun.text(synthetic(False))
    block = block_of(text)
    for row in ("Time in seconds", "Mop/s total", "Mop/s/process"):
        assert block[row] == "FAILED (verification)", block
    assert block["Class"] == "A" and block["Size"] == "64x  64x  64"
    assert block["Total processes"] == "4"
    assert "11424" not in text and "2856" not in text and "computation" not in text
    interrupted = synthetic(True) | {"status": "interrupted"}
    assert block_of(npbrun.text(interrupted))["Mop/s total"] == "FAILED (interrupted)"


def test_section_draws_per_process_rates_and_the_paper() -> None:
    records = [
        synthetic(True, np=n, mops_per_process=100.0 / n, name=f"LU.A.{n}") for n in (1, 2, 4)
    ] + [synthetic(False, np=8, mops_total=777.77, time_s=6.54)]
    lines = section.series(records)
    assert lines == {("LU.A", "openmpi", "vc"): {1: 100.0, 2: 50.0, 4: 25.0}}  # failed left out
    html = section.render(records)
    assert "Mop/s per process" in html and "UNSUCCESSFUL" in html
    # the failed run's row: FAILED and why instead of its time and rates
    assert "FAILED (verification)" in html and "777.8" not in html and "6.540" not in html
    assert section.measured(records[-1])[:3] == ["FAILED (verification)"] * 3
    assert "etlwiz" in html and "193" in html  # seeds/003's machine and its latency
    assert section.comm_percent(records[0]["figures"]) == "10"  # 1 s of 10 s
    assert paper.paper()["source"].startswith("seeds/003")


def test_bad_class_and_unavailable_benchmark_are_user_errors() -> None:
    with pytest.raises(UserError, match="--class"):
        npbrun.kernel_args("Q")
    with pytest.raises(UserError, match="SP is not built"):
        npbrun.kernel_of("sp")


@pytest.mark.parametrize(
    "args, named",
    [
        (["ep", "--class", "S", "--np", "300"], "EP.S runs on 1-256 ranks"),
        (["ep", "--class", "Z"], "--class"),
        (["lu", "--class", "S", "--np", "5"], "LU.S runs on"),
        (["lu", "--class", "S", "--dt", "0"], "--dt: expected a positive number (the time step)"),
        (["ep", "--class", "S", "--dt", "0.5"], "--dt"),  # EP has no time step
    ],
)
def test_bad_input_is_one_line_before_anything_launches(tmp_path, args, named) -> None:
    assert_refused_before_launch(["npb", *args], tmp_path / "r.db", named)


@pytest.mark.parametrize("kernel", ["ct-npb-lu", "ct-npb-bt"])
def test_dt_is_a_positive_number_not_a_duration(kernel) -> None:
    """Review F19: --dt was parsed as a duration ("a number of seconds"), though NPB's time
    step has no unit; 0, a negative, a suffix or nan is one error line, exit 2."""
    for mpi in MPIS:
        path = str(kernels.kernel_path(kernel, mpi))
        for text in ("0", "-1", "1m", "nan"):
            out = subprocess.run(
                [path, "--class", "S", "--dt", text, "--check-only", "--np", "1"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert out.returncode == 2, out
            assert out.stderr == (
                f"{kernel}: --dt: expected a positive number (the time step), got '{text}'\n"
            )
        ok = [path, "--class", "S", "--dt", "0.5", "--check-only", "--np", "1"]
        assert subprocess.run(ok, capture_output=True, timeout=30).returncode == 0


def compared(record: dict) -> dict[str, dict]:
    return {c["name"]: c for c in record["figures"]["compared"]}


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("np_", (1, 2, 4))
def test_ep_class_s_verifies(store, mpi: str, np_: int) -> None:
    record = npbrun.run_npb(local_cluster(), store, "ep", "S", np_, mpi, timeout=120)
    f = record["figures"]
    assert record["status"] == "ok" and record["verification"] == "passed", record["error"]
    assert f["verified"] is True and f["name"] == f"EP.S.{np_}"
    c = compared(record)
    assert c["sx"]["reference"] == -3.247834652034740e3 and c["sx"]["rel_error"] <= 1e-8
    assert c["gaussian_pairs"]["value"] == 13176389  # bit-identical on any rank count
    assert record["detail"]["counts"][:6] == [6140517, 5865300, 1100361, 68546, 1648, 17]
    assert f["mops_total"] == pytest.approx(2**25 / f["time_s"] / 1e6)
    assert len(f["comp_time_s_per_rank"]) == np_ == len(f["comm_time_s_per_rank"])
    assert f["messages_per_iteration"] == np_  # one reduction per rank
    assert record["meta"]["np"] == np_


@pytest.mark.parametrize("bench", ("ep", "lu"))
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("np_", (1, 2, 4))
def test_class_w_verifies(store, bench: str, mpi: str, np_: int) -> None:
    record = npbrun.run_npb(local_cluster(), store, bench, "W", np_, mpi, timeout=180)
    assert record["verification"] == "passed", record["error"]
    assert record["figures"]["size"] == ([2**26] if bench == "ep" else [33, 33, 33])
    assert all(c["rel_error"] <= 1e-8 for c in record["figures"]["compared"])


@pytest.mark.parametrize("mpi", MPIS)
def test_ep_injected_fault_is_unsuccessful_and_stored_failed(store, mpi: str) -> None:
    record = npbrun.run_npb(local_cluster(), store, "ep", "S", 2, mpi, inject_fault=True)
    assert record["status"] == "failed" and record["verification"] == "failed"
    assert record["figures"]["verified"] is False
    assert not compared(record)["sx"]["passed"]
    assert store.get(record["id"])["status"] == "failed"
    assert "UNSUCCESSFUL" in npbrun.text(record)
    assert block_of(npbrun.text(record))["Mop/s total"] == "FAILED (verification)"
    assert "exit status 1" in record["error"]  # the kernel fails its job too, as ct-linpack


@pytest.mark.root
def test_demo_step_on_the_4_host_cluster(make_vcluster, store) -> None:
    from clustertune import catalog
    from clustertune.levels.npb import demo

    order = [level.name for level in catalog.all_levels()]
    assert order.index("npb") > order.index("linpack")
    cluster = make_vcluster(hosts=4)
    started = time.monotonic()
    records = demo.demo(cluster, store)
    assert time.monotonic() - started < 90
    assert all(r["status"] == "ok" and r["verification"] == "passed" for r in records)
    names = {r["figures"]["name"] for r in records}
    assert {"EP.S.1", "EP.S.2", "EP.S.4", "LU.S.1", "LU.S.2", "LU.S.4"} <= names
    assert {"BT.S.1", "BT.S.4"} <= names
    assert len({r["meta"]["hosts"][-1] for r in records if r["figures"]["np"] == 4}) >= 1
    html = report.build(store, [r["id"] for r in records])
    assert "NAS Parallel Benchmarks" in html and "EP.S.4" in html
    assert "Mop/s per process" in html


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("np_, grid", [(1, [1, 1]), (2, [2, 1]), (4, [2, 2])])
def test_lu_class_s_verifies(store, mpi: str, np_: int, grid: list[int]) -> None:
    record = npbrun.run_npb(local_cluster(), store, "lu", "S", np_, mpi, timeout=120)
    f = record["figures"]
    assert record["status"] == "ok" and record["verification"] == "passed", record["error"]
    assert f["name"] == f"LU.S.{np_}" and f["grid"] == grid and f["size"] == [12, 12, 12]
    c = compared(record)
    assert set(c) == {f"xcr{m}" for m in range(1, 6)} | {f"xce{m}" for m in range(1, 6)} | {"xci"}
    assert c["xci"]["reference"] == 7.8418928865937083 and c["xci"]["rel_error"] <= 1e-8
    assert all(x["rel_error"] <= 1e-8 for x in c.values())
    assert f["iterations"] == 50 and f["dt_ok"] is True
    ops = 50 * (1984.77 * 12**3 - 10923.3 * 12**2 + 27770.9 * 12 - 144010)
    assert f["mops_total"] == pytest.approx(ops / f["time_s"] / 1e6)
    # per step: one strip per plane (10 interior planes) and grid edge in each sweep, one
    # halo per neighbour; per run: the residual norms' reduction (one per rank)
    edges, halos = {1: (0, 0), 2: (1, 2), 4: (4, 8)}[np_]
    assert f["messages_per_iteration"] == pytest.approx(2 * 10 * edges + halos + np_ / 50)


@pytest.mark.parametrize("np_, grid", [(3, [3, 1]), (6, [3, 2])])
def test_lu_on_counts_npb_does_not_take(store, np_: int, grid: list[int]) -> None:
    """Beyond NPB 3.4 (powers of two and squares): 3 = 3 x 1 and 6 = 3 x 2 grids."""
    record = npbrun.run_npb(local_cluster(), store, "lu", "S", np_, "openmpi", timeout=180)
    assert record["verification"] == "passed", record["error"]
    assert record["figures"]["grid"] == grid


@pytest.mark.parametrize("mpi", MPIS)
def test_lu_injected_fault_is_unsuccessful_and_stored_failed(store, mpi: str) -> None:
    record = npbrun.run_npb(local_cluster(), store, "lu", "S", 2, mpi, inject_fault=True)
    assert record["status"] == "failed" and record["verification"] == "failed"
    assert not all(c["passed"] for c in record["figures"]["compared"])
    assert "UNSUCCESSFUL" in npbrun.text(record)


@pytest.mark.parametrize("bench, dt, class_dt", [("lu", 0.4, 0.5), ("bt", 0.011, 0.01)])
def test_a_run_whose_dt_is_not_the_classs_fails_verification(store, bench, dt, class_dt):
    """NPB checks the dt the run used (its input file can change it): LU compared the
    class's dt with itself and BT set the check to 1, so neither could fail."""
    record = npbrun.run_npb(local_cluster(), store, bench, "S", 1, "openmpi", dt=dt)
    f = record["figures"]
    assert (f["dt"], f["dt_reference"], f["dt_ok"]) == (dt, class_dt, False)
    assert record["status"] == "failed" and record["verification"] == "failed"
    assert f"dt {dt:g} is not class S's {class_dt:g}" in npbrun.text(record)
    healthy = npbrun.run_npb(local_cluster(), store, bench, "S", 1, "openmpi", dt=class_dt)
    assert healthy["figures"]["dt_ok"] is True and healthy["status"] == "ok", healthy["error"]
    assert "is not class" not in npbrun.text(healthy)


def test_bench_script_reads_both_outputs() -> None:
    """bench/npb_vs_official.py: NPB's print_results block and our result line."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "npb_vs_official.py"
    spec = importlib.util.spec_from_file_location("npb_vs_official", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    official = """ LU Benchmark Completed.
 Class           =                        A
 Time in seconds =                    10.44
 Mop/s total     =                 11424.13
 Verification    =               SUCCESSFUL
"""
    assert bench.parse_npb(official) == {"time_s": 10.44, "mops": 11424.13, "verified": True}
    failed = official.replace("  SUCCESSFUL", "UNSUCCESSFUL")
    assert bench.parse_npb(failed)["verified"] is False
    ours = (
        'noise\n{"type":"result","verification":"failed","figures":{"time_s":2.0,'
        '"mops_total":5.5,"verified":false}}\n'
    )
    assert bench.parse_ours(ours) == {"time_s": 2.0, "mops": 5.5, "verified": False}
    s = bench.summary(
        [
            {"mops": 3.0, "verified": True},
            {"mops": 9.0, "verified": False},
            {"mops": 5.0, "verified": True},
        ]
    )
    assert (s["best"], s["median"], s["all_verified"]) == (5.0, 4.0, False)
