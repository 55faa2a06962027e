"""CPU time beside wall time per rank (issue 22 item 3): every MPI kernel writes one rank
line at MPI_Finalize (kernels/common/ct_mpi.h), the record keeps them in
detail.rank_times, the levels' text and report sections show CPU/wall per rank, and the
sections flag a rank whose CPU/wall is far from its peers' -- with no alarm for a healthy
job, an oversubscribed one, or one on a machine loaded by other work."""

from __future__ import annotations

import json

import pytest

from clustertune import cli, ranktimes
from clustertune.cluster import local_cluster
from clustertune.levels.linpack import section as linpack_section
from clustertune.levels.npb import run as npbrun
from clustertune.levels.npb import section as npb_section
from clustertune.levels.probe.run import probe_job
from clustertune.levels.qcd import run as qcdrun
from clustertune.levels.qcd import section as qcd_section


def timed(*ratios: float, wall: float = 10.0) -> dict:
    times = [
        {"rank": k, "host": f"host{k}", "wall_s": wall, "cpu_s": r * wall}
        for k, r in enumerate(ratios)
    ]
    return {"id": 7, "kernel": "ct-npb-lu", "detail": {"rank_times": times}}


@pytest.mark.parametrize(
    "ratios",
    [
        (0.99, 0.98, 0.97, 0.99),  # one rank per core, MPI spinning while it waits
        (0.50, 0.49, 0.51, 0.50),  # 4 ranks on 2 cores: all share alike
        (0.040, 0.060),  # a machine loaded by other work: a few % each, noise apart
        (1.00, 0.80),  # a fifth apart: within the spread of a busy machine
    ],
)
def test_no_alarm_when_the_ranks_are_alike(ratios) -> None:
    record = timed(*ratios)
    assert ranktimes.outliers(record) == []
    assert "!" not in ranktimes.cell(record) and "CHECK" not in ranktimes.text(record)


def test_a_rank_sharing_its_core_is_flagged() -> None:
    record = timed(0.98, 0.97, 0.45, 0.99)
    (rank, said), *more = ranktimes.outliers(record)
    assert not more and rank == 2
    assert said == (
        "rank 2 (host2): CPU/wall 0.45, its peers' 0.98: it waited without "
        "spinning or shared its core"
    )
    assert ranktimes.cell(record) == "0.98 0.97 0.45! 0.99"
    assert f"CHECK {said}" in ranktimes.text(record)
    html = ranktimes.section_part([timed(0.98, 0.45)], "NPB")
    assert "NPB: CPU time beside wall time" in html and "<b>CHECK</b> run 7: rank 1" in html
    assert "<td>0.98 0.45!</td>" in html


def test_a_rank_running_extra_threads_is_flagged() -> None:
    assert [r for r, _ in ranktimes.outliers(timed(1.0, 0.99, 1.9))] == [2]
    assert "more than one thread" in ranktimes.outliers(timed(1.0, 0.99, 1.9))[0][1]


def waited(*ranks: tuple[float, float], wall: float = 10.0) -> dict:
    """A record whose rank lines carry wait_s: (CPU s, wait s) per rank."""
    record = timed(*(cpu / wall for cpu, _ in ranks), wall=wall)
    for t, (_, wait) in zip(record["detail"]["rank_times"], ranks, strict=True):
        t["wait_s"] = wait
    return record


def test_a_healthy_rank_that_napped_in_a_long_wait_is_not_flagged() -> None:
    # review F9: ct_mpi_waitall naps (87b6611), so rank 2, waiting 6.5 of its 10 s, reads
    # CPU/wall 0.35; over the 3.5 s it was not waiting it used its core like its peers
    record = waited((9.8, 0.1), (9.7, 0.2), (3.5, 6.5), (9.9, 0.05))
    assert ranktimes.outliers(record) == []
    assert "CHECK" not in ranktimes.text(record) and "(waited 6.50 s)" in ranktimes.text(record)
    # nearly all of its time in a wait: the waits' polling CPU over a short busy time
    # must not read as extra threads either (CPU/(wall - wait) 1.7)
    assert ranktimes.outliers(waited((9.8, 0.1), (1.7, 9.0))) == []


def test_a_rank_sharing_its_core_is_flagged_beside_its_waits() -> None:
    record = waited((9.8, 0.1), (3.6, 2.0), (9.9, 0.05))
    assert ranktimes.outliers(record) == [
        (1, "rank 1 (host1): CPU/(wall - wait) 0.45, its peers' 0.99: it shared its core")
    ]
    assert [r for r, _ in ranktimes.outliers(waited((10.0, 0.0), (9.9, 0.1), (19.0, 0.0)))] == [2]


def test_a_short_run_is_not_judged() -> None:
    assert ranktimes.outliers(timed(0.98, 0.30, wall=0.1)) == []


def rank_times(record: dict, np: int) -> list[dict]:
    times = record["detail"]["rank_times"]
    assert [t["rank"] for t in times] == list(range(np)), times
    for t in times:
        assert t["wall_s"] > 0 and t["cpu_s"] == pytest.approx(t["user_s"] + t["system_s"])
        assert 0 < t["cpu_s"] <= 2.5 * t["wall_s"]  # a few helper threads at most
    return times


@pytest.mark.parametrize("mpi", ("openmpi", "mpich"))
def test_npb_records_and_shows_cpu_and_wall_per_rank(store, mpi) -> None:
    record = npbrun.run_npb(local_cluster(), store, "lu", "S", 2, mpi, timeout=120)
    assert record["status"] == "ok", record["error"]
    times = rank_times(record, 2)
    text = npbrun.text(record)
    assert f"  CPU/wall per rank ({ranktimes.cell(record)}): 0: {times[0]['cpu_s']:.2f}/" in text
    assert "CPU time beside wall time, per rank" in npb_section.render([record])
    assert store.get(record["id"])["detail"]["rank_times"] == times


@pytest.mark.parametrize("mpi", ("openmpi", "mpich"))
def test_a_healthy_live_run_records_its_waits_and_is_not_flagged(store, mpi) -> None:
    # LU.W: long enough to be judged (LU.S runs ~15 ms, below MIN_WALL_S); its pipeline
    # waits in ct_mpi_waitall, which naps, so wait_s is well above 0
    record = npbrun.run_npb(local_cluster(), store, "lu", "W", 2, mpi, timeout=300)
    assert record["status"] == "ok", record["error"]
    times = rank_times(record, 2)
    assert min(t["wall_s"] for t in times) >= ranktimes.MIN_WALL_S
    assert all(0 < t["wait_s"] < t["wall_s"] for t in times), times
    assert ranktimes.outliers(record) == [], ranktimes.text(record)


def test_qcd_records_and_shows_cpu_and_wall_per_rank(store) -> None:
    spec = qcdrun.QcdSpec(lattice=(4, 4, 4, 4), grid=(1, 1, 1, 2), sweeps=2)
    record = qcdrun.run_qcd(local_cluster(), store, spec, np=2, mpi="openmpi", timeout=120)
    assert record["status"] == "ok", record["error"]
    rank_times(record, 2)
    assert "CPU/wall per rank (" in qcdrun.text(record)
    assert "QCD: CPU time beside wall time" in qcd_section.render([record])


def test_linpack_records_and_shows_cpu_and_wall_per_rank(capsys) -> None:
    assert cli.main(["linpack", "--np", "2", "-N", "300", "--nb", "32", "--blas", "system"]) == 0
    assert "CPU/wall per rank (" in capsys.readouterr().out
    assert (
        cli.main(["linpack", "--np", "2", "-N", "300", "--nb", "32", "--blas", "system", "--json"])
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    rank_times(record, 2)
    assert "Linpack and GEMM: CPU time beside wall time" in linpack_section.render([record])


def test_the_probe_writes_its_rank_lines_too(store) -> None:
    record = probe_job(local_cluster(), store, 2, "mpich", timeout=60)
    assert record["status"] == "ok", record["error"]
    rank_times(record, 2)
