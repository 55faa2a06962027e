"""The side-by-side benchmark scripts read the established tools' output correctly and
judge the ratios as documented (the runs themselves are benchmarks, not tests)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


netpipe = load("netpipe_compare")
hpcc = load("linpack_vs_hpcc")

# NetPIPE 3.7.2's np.out (bytes, Mbit/s in 2^20 bits, half round trip in s) and the
# progress lines it writes while running ("R times --> ... in T usec").
NP_OUT = """\
       1   0.413567   0.00001845
       2   0.829126   0.00001840
 8388608 935.412110   0.06841650
"""
NP_PROGRESS = """\
Now starting the main loop
  0:       1 bytes   5193 times -->      0.41 Mbps in      18.45 usec
  1:       2 bytes   5420 times -->      0.83 Mbps in      18.40 usec
 75: 8388608 bytes      3 times -->    935.41 Mbps in   68416.50 usec
"""


def test_netpipe_output_gives_min_times_and_trial_lengths(tmp_path):
    out = tmp_path / "np.out"
    out.write_text(NP_OUT)
    curve = netpipe.read_netpipe(out, "NPtcp", 12.0, NP_PROGRESS)
    assert curve.times == {1: 1.845e-05, 2: 1.840e-05, 8388608: 0.0684165}
    # one trial = R round trips of 2 half round trips of T
    assert curve.trial_s[1] == pytest.approx(2 * 5193 * 18.45e-6)
    assert curve.trial_s[8388608] == pytest.approx(2 * 3 * 0.0684165)
    assert curve.throughput_mbps(8388608) == pytest.approx(980.88, abs=0.01)  # 10^6 bit/s
    # the matched ct options: NetPIPE's 3 trials of its trial length at those sizes
    assert netpipe.matched(curve, [1]) == ("--trials", "3", "--point-time", "0.5749")


def test_netpipe_without_data_is_an_error(tmp_path):
    out = tmp_path / "np.out"
    out.write_text("")
    with pytest.raises(RuntimeError, match="wrote no data"):
        netpipe.read_netpipe(out, "NPmpich2", 1.0)


@pytest.mark.parametrize(
    ("ours", "theirs", "ratio", "passes"),
    [
        ([10.0, 10.9, 30.0], [10.0, 10.0, 10.0], 1.09, True),  # the median resists one outlier
        ([9.0, 8.9, 9.1], [10.0, 10.0, 10.0], 0.9, True),
        ([12.0, 12.0, 12.0], [10.0, 10.0, 10.0], 1.2, False),
        ([8.0, 8.0, 8.0], [10.0, 10.0, 10.0], 0.8, False),  # faster is a miss too
    ],
)
def test_ratio_row_judges_the_median_within_the_band(ours, theirs, ratio, passes):
    row = netpipe.ratio_row(ours, theirs, 0.10)
    assert row["ratio"] == pytest.approx(ratio)
    assert row["pass"] is passes
    assert row["ratio_of_min"] == pytest.approx(min(ours) / min(theirs))
    assert "pass" not in netpipe.ratio_row(ours, theirs, None)


# HPL as printed inside hpcc 1.5.0 ("%16.7f" residual, "%18.3e" Gflops)
HPCC_OUT = """\
Begin of HPL section.
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11C2R4       10000   192     1     2               8.72             7.648e+01
HPL_pdgesv() start time Mon Nov 23 11:02:10 2026

HPL_pdgesv() end time   Mon Nov 23 11:02:19 2026

--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=       0.0024336 ...... PASSED
================================================================================
"""


def test_hpcc_output_gives_hpl_rate_and_residual():
    got = hpcc.parse_hpcc_output(HPCC_OUT)
    assert got == {
        "variant": "WR11C2R4",
        "time_s": 8.72,
        "gflops": 76.48,
        "residual": 0.0024336,
        "passed": True,
    }
    failed = hpcc.parse_hpcc_output(HPCC_OUT.replace("PASSED", "FAILED"))
    assert failed["passed"] is False


def test_hpcc_output_without_hpl_line_is_an_error():
    with pytest.raises(RuntimeError, match="no HPL result line"):
        hpcc.parse_hpcc_output("Begin of HPL section.\nEnd of HPL section.\n")


studies = load("studies_full")


def test_studies_full_runs_every_study_when_one_fails(tmp_path, monkeypatch, capsys):
    """A study raising and one with a point not ok are each reported as failed, the others
    still run, the report is written, and the exit status is 1; all ok exits 0."""
    ran = []

    def fake(name: str, store, quick: bool, out) -> dict:
        ran.append(name)
        if name == "npb-qcd":
            raise RuntimeError("cluster did not come up")
        bad = ["tcp-buffer/tcp_buffer=4K/openmpi/r1: failed"] if name == "grid-linpack" else []
        return {"points": 3, "ran": 3, "skipped": 0, "problems": bad, "ok": not bad}

    monkeypatch.setattr(studies, "run_study", fake)
    argv = [
        "--db",
        str(tmp_path / "s.db"),
        "--out",
        str(tmp_path / "out"),
        "--json",
        str(tmp_path / "s.json"),
    ]
    names = "npb-qcd,grid-linpack,beowulf-tuning"
    assert studies.main([*argv, "--studies", names]) == 1
    assert ran == names.split(",")
    out = capsys.readouterr().out
    assert "RuntimeError: cluster did not come up" in out and "tcp_buffer=4K" in out
    assert "2 of 3 studies failed" in out and "== beowulf-tuning: ok in" in out
    assert (tmp_path / "out" / "clustertune-report.html").is_file()
    rows = json.loads((tmp_path / "s.json").read_text())
    assert [r["ok"] for r in rows] == [False, False, True] and all(r["wall_s"] >= 0 for r in rows)
    assert studies.main([*argv, "--studies", "beowulf-tuning"]) == 0
    assert studies.main([*argv, "--studies", "no-such-study"]) == 2


def test_studies_full_stops_at_a_stop_signal():
    """Ctrl-C (or SIGTERM, through the CLI's handler) stops the study running and the rest."""
    ran = []

    def fake(name: str) -> dict:
        ran.append(name)
        if name == "b":
            raise KeyboardInterrupt
        return {"ok": True, "problems": []}

    rows = studies.run_all(["a", "b", "c"], fake, log=lambda line: None)
    assert ran == ["a", "b"] and [r["ok"] for r in rows] == [True, False]
    assert rows[1]["problems"] == ["interrupted (SIGINT)"]
