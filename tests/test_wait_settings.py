"""The variables that tune the kernels' message wait, CT_MPI_WAIT_SPIN_US and
CT_MPI_WAIT_NAP_US (ct_mpi_waitall, kernels/common/ct_mpi.c): a value that is not an
integer in range is bad input, refused at the start with one line naming the variable and
exit status 2 (it used to be taken as the default, or as a wait of any length); a nap of a
second or more naps (nanosleep refused it, and the wait spun on the CPU instead).

The kernels are run straight through mpirun / mpiexec, from $CLUSTERTUNE_BUILD_DIR (the
tree `make kernels` builds by default)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_linpack_wait import build_waiter, run_waiter

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("CLUSTERTUNE_BUILD_DIR", ROOT / "build"))
LAUNCH = {
    "openmpi": ["mpirun.openmpi", "--oversubscribe", "-np", "2"],
    "mpich": ["mpiexec.mpich", "-n", "2"],
}
KNOBS = ("CT_MPI_WAIT_SPIN_US", "CT_MPI_WAIT_NAP_US")


def kernel(flavour: str, name: str) -> Path:
    path = BUILD / flavour / "bin" / name
    if not path.is_file() or not shutil.which(LAUNCH[flavour][0]):  # make setup builds both
        pytest.fail(f"{path} or {LAUNCH[flavour][0]} missing (make setup)")
    return path


def environment(**knobs: str) -> dict[str, str]:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for knob in KNOBS:
        env.pop(knob, None)
    env.update(knobs)
    return env


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith('{"type"')]


BAD = [
    ("CT_MPI_WAIT_NAP_US", "abc", "0"),
    ("CT_MPI_WAIT_NAP_US", "-5", "0"),
    ("CT_MPI_WAIT_NAP_US", "200us", "0"),
    ("CT_MPI_WAIT_SPIN_US", "99999999999999999999", "-1"),  # beyond a long
    ("CT_MPI_WAIT_SPIN_US", "20000000", "-1"),  # 20 s
    ("CT_MPI_WAIT_SPIN_US", "-2", "-1"),
]


@pytest.mark.parametrize("flavour", sorted(LAUNCH))
@pytest.mark.parametrize(("name", "value", "lowest"), BAD)
def test_a_bad_wait_setting_is_refused_with_one_line(flavour, name, value, lowest) -> None:
    """One error line (stderr, and the JSON error line on stdout) naming the variable, what
    it takes and what it got; no result; exit status 2, as for a bad flag."""
    argv = [*LAUNCH[flavour], str(kernel(flavour, "ct-probe"))]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=environment(**{name: value}), timeout=60
    )
    expected = (
        f"ct-probe: {name}: expected an integer from {lowest} to 10000000 (microseconds), "
        f"got '{value}'"
    )
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-500:])
    assert json_lines(done.stdout) == [{"type": "error", "message": expected}], done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {expected}"], done.stderr


@pytest.mark.parametrize("flavour", sorted(LAUNCH))
def test_good_wait_settings_run_as_before(flavour) -> None:
    """The edges of the ranges, an empty value (the default) and the defaults: no false
    alarm, the probe passes."""
    probe = kernel(flavour, "ct-probe")
    for knobs in (
        {},
        {"CT_MPI_WAIT_SPIN_US": "-1", "CT_MPI_WAIT_NAP_US": "0"},
        {"CT_MPI_WAIT_SPIN_US": "10000000", "CT_MPI_WAIT_NAP_US": "10000000"},
        {"CT_MPI_WAIT_SPIN_US": "", "CT_MPI_WAIT_NAP_US": "200"},
    ):
        done = subprocess.run(
            [*LAUNCH[flavour], str(probe)],
            capture_output=True,
            text=True,
            env=environment(**knobs),
            timeout=60,
        )
        assert done.returncode == 0, (knobs, done.stderr[-500:])
        results = [j for j in json_lines(done.stdout) if j["type"] == "result"]
        assert [r["verification"] for r in results] == ["passed"], (knobs, done.stdout)


def test_check_only_refuses_a_bad_wait_setting() -> None:
    """The launcher's question before mpirun (--check-only) gets the same line."""
    qcd = kernel("openmpi", "ct-qcd")
    argv = [str(qcd), "--lattice", "4x4x4x4", "--check-only", "--np", "2"]
    good = subprocess.run(argv, capture_output=True, text=True, env=environment(), timeout=30)
    assert (good.returncode, good.stderr) == (0, "")
    bad = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=environment(CT_MPI_WAIT_NAP_US="1e3"),
        timeout=30,
    )
    assert bad.returncode == 2
    assert bad.stderr == (
        "ct-qcd: CT_MPI_WAIT_NAP_US: expected an integer from 0 to 10000000 (microseconds), "
        "got '1e3'\n"
    )


@pytest.fixture(scope="module")
def waiter(tmp_path_factory) -> Path:
    """test_linpack_wait's program (rank 0 waits in ct_mpi_waitall for a late message and
    reports the wall and CPU time of the wait), linked with this tree's harness."""
    return build_waiter(tmp_path_factory.mktemp("nap"))


def test_a_nap_of_a_second_or_more_naps(waiter) -> None:
    """Naps up to 1.5 s, the message 2.5 s late: the naps double from 1 us past a second
    (1.05 s), and those of a second or more must nap too. nanosleep refuses a tv_nsec of a
    second or more; the old wait then polled without pause from 1.05 s to 2.5 s (CPU 1.4 s
    under chrt). The wait ends at most one nap after the message."""
    got = run_waiter(waiter, 2500, environment(CT_MPI_WAIT_NAP_US="1500000"))
    assert got["value"] == 42 and 2.45 <= got["wall_s"] <= 2.5 + 1.5 + 0.5, got
    assert got["cpu_s"] < 0.25, got
