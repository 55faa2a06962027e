"""bench/qcd_vs_milc.py reads MILC su3_ora's output right (its time line and the GMES
plaquettes, normalised (ss + st) / 6) and writes MILC's input with the bench's schedule."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "qcd_vs_milc.py"


def bench():
    spec = importlib.util.spec_from_file_location("qcd_vs_milc", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["qcd_vs_milc"] = module
    spec.loader.exec_module(module)
    return module


MILC_OUT = """\
WARMUPS COMPLETED
GMES 7.605970e-02 -6.604058e-02 9.990000e+01 1.786162e+00 1.778098e+00
GMES 2.038033e-01 5.678760e-03 9.990000e+01 1.782476e+00 1.779822e+00
RUNNING COMPLETED
Time = 9.448433e+00 seconds
total_iters = 0
"""


def test_milc_output_and_input() -> None:
    b = bench()
    t, plaq = b.parse_milc(MILC_OUT)
    assert t == pytest.approx(9.448433)
    assert plaq == pytest.approx([(1.786162 + 1.778098) / 6, (1.782476 + 1.779822) / 6])
    text = b.milc_input((8, 8, 8, 16), 5.7, 20, 30, 9)
    for line in (
        "nx 8",
        "nt 16",
        "beta 5.7",
        "warms 20",
        "trajecs 30",
        "steps_per_trajectory 4",
        "qhb_steps 1",
        "fresh",
        "iseed 9",
    ):
        assert line in text.splitlines()
    with pytest.raises(RuntimeError):
        b.parse_milc("GMES 1 2 3 4 5\n")  # no time line: the run did not finish


def test_rotation_puts_each_program_first_in_turn() -> None:
    b = bench()
    assert [b.rotation(["milc", "ours"], i) for i in range(3)] == [
        ["milc", "ours"],
        ["ours", "milc"],
        ["milc", "ours"],
    ]
    three = [b.rotation(["milc", "ours", "baseline"], i) for i in range(3)]
    assert [r[0] for r in three] == ["milc", "ours", "baseline"]
    assert all(sorted(r) == ["baseline", "milc", "ours"] for r in three)


def test_compare_pairs_the_runs_of_a_round() -> None:
    c = bench().compare([2.0, 1.0, 6.0], [1.0, 2.0, 3.0])
    assert c["ratio_best"] == 2.0 and c["ratio_median"] == 1.0
    assert c["ratio_rounds"] == [2.0, 0.5, 2.0]
    with pytest.raises(ValueError):
        bench().compare([1.0], [1.0, 2.0])  # a round without its pair


def test_baseline_must_be_an_executable(tmp_path) -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, str(BENCH), "--baseline", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "--baseline" in out.stderr
