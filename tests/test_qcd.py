"""The QCD level (ct-qcd through clustertune qcd on this host): the verification list of
the issue on 4^4 lattices -- cold start exactly 1, links in SU(3), gauge invariance, the
plaquette series bitwise the same on every process grid (1, 2, 4, 8 oversubscribed ranks,
both MPIs) and across a checkpoint and resume, a corrupted halo message failing the run --
the heat bath against the strong- and weak-coupling expansions, bad input before launch,
the decomposition table, the report section. Physics at beta 6.0 / 5.7 and speed are in
bench/qcd_vs_milc.py."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from clustertune import cli
from clustertune.cluster import local_cluster
from clustertune.levels.qcd import run, section, study
from clustertune.levels.qcd import summary as qsummary
from clustertune.runner import new_record
from clustertune.studies.spec import load as load_study

L4 = (4, 4, 4, 4)


def qcd(store, np: int = 1, grid=(1, 1, 1, 1), mpi: str = "openmpi", **spec) -> dict:
    spec.setdefault("sweeps", 3)
    return run.run_qcd(
        local_cluster(),
        store,
        run.QcdSpec(lattice=spec.pop("lattice", L4), grid=grid, **spec),
        np=np,
        mpi=mpi,
        timeout=120,
    )


def test_cold_start_is_exactly_one_and_every_check_passes(store) -> None:
    r = qcd(store, sweeps=4)
    f = r["figures"]
    assert r["status"] == "ok" and r["verification"] == "passed"
    assert f["plaquette_start"] == 1.0  # exactly
    assert r["samples"][0]["plaquette_hex"] == "0x1p+0"
    assert len(f["plaquette_series"]) == 4 and all(
        0.55 < p < 0.7 for p in f["plaquette_series"][1:]
    )
    assert f["unitarity_error"] <= 1e-12 and f["det_error"] <= 1e-12
    assert f["gauge_invariance_error"] <= 1e-12 and f["gauge_link_change"] > 0.1
    assert f["link_updates"] == 4 * 256 * 5 * 4


@pytest.mark.parametrize("or_steps", [0, 4])
def test_qcdflops_counts_heat_bath_link_updates_only(store, or_steps, capsys) -> None:
    """seeds/003's QCDFlops is QCDMPI's: 5700 x the links the heat bath updated (QCDMPI has
    no over-relaxation); it once counted every OR pass too (1.75x the counted flops with
    4 passes). The counted flops and all link updates/s stay beside it, in the text too."""
    assert (
        cli.main(
            [
                "qcd",
                "--np",
                "1",
                "--lattice",
                "4x4x4x4",
                "--sweeps",
                "3",
                "--or-steps",
                str(or_steps),
                "--json",
            ]
        )
        == 0
    )
    f = json.loads(capsys.readouterr().out)["figures"]
    hb = 4 * 256 * 3
    assert (f["hb_link_updates"], f["link_updates"]) == (hb, hb * (1 + or_steps))
    assert f["qcdflops_gflops"] == pytest.approx(5700 * hb / f["time_s"] / 1e9)
    assert f["link_updates_per_s"] == pytest.approx(hb * (1 + or_steps) / f["time_s"])
    counted = hb * (3318 + or_steps * 3243)
    assert f["counted_gflops"] == pytest.approx(counted / f["time_s"] / 1e9)
    text = run.text(
        {
            "id": 1,
            "status": "ok",
            "verification": "passed",
            "error": None,
            "params": {},
            "figures": f,
        }
    )
    assert f"QCDFlops {f['qcdflops_gflops']:.3f} Gflops" in text
    assert f"= 5700 x {f['hb_link_updates_per_s']:.4g} heat-bath link updates/s" in text
    assert f"counted {f['counted_gflops']:.3f} Gflops" in text
    assert f"{f['link_updates_per_s']:.4g} link updates/s" in text


def test_npb_qcd_study_runs_qcdmpis_schedule_beside_table_5() -> None:
    """The study sets its QCD figures beside the paper's tables 3 and 5: heat bath only."""
    for quick in (False, True):
        steps = load_study("npb-qcd", quick=quick).steps
        qcd_steps = [s for s in steps if s.kind == "qcd"]
        assert qcd_steps and all(s.params["or_steps"] == 0 for s in qcd_steps)


def test_series_bitwise_identical_on_every_grid(store) -> None:
    """Site-keyed random numbers and an exact (integer) plaquette sum: the same series on
    1, 2, 4 and 8 ranks (8 share this machine's cores), with one rank's local extent 1."""
    grids = [(1, (1, 1, 1, 1)), (2, (2, 1, 1, 1)), (4, (1, 1, 2, 2)), (4, (4, 1, 1, 1)),
             (8, (2, 2, 2, 1))]  # fmt: skip
    series = []
    for np, grid in grids:
        r = qcd(store, np, grid, start="hot", seed=11)
        assert r["verification"] == "passed", r["error"]
        series.append([s["plaquette_hex"] for s in r["samples"]])
        if np > 1:
            assert r["figures"]["messages_per_sweep"] > 0 and r["figures"]["comm_mbps"] > 0
    assert all(s == series[0] for s in series[1:])
    assert len(set(series[0])) == 4  # it moved


def cpu_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text()
    return set(next(line for line in text.splitlines() if line.startswith("flags")).split())


@pytest.mark.skipif("fma" not in cpu_flags(), reason="the CPU has no FMA: one libm path only")
def test_series_is_bitwise_for_one_machine_only(store, monkeypatch) -> None:
    """docs/qcd.md claims bit-identity on one machine, not across machines: glibc picks
    the code of cos, sincos and log by the CPU's features, and its non-FMA path (a CPU
    without FMA) gives another series from the same seed."""
    here = qcd(store, start="hot", sweeps=4)["figures"]["plaquette_series"]
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX2,-FMA")
    elsewhere = qcd(store, start="hot", sweeps=4)["figures"]["plaquette_series"]
    assert elsewhere[0] == here[0] and elsewhere != here  # the start agrees, the updates not
    doc = (Path(__file__).resolve().parents[1] / "docs" / "qcd.md").read_text()
    assert "That is a statement about **one machine**" in doc
    assert "not bitwise the same in general" in doc


def test_every_direction_split_goes_step_by_step_with_the_same_bits(store) -> None:
    """2x2x2x2 leaves no unsplit direction for the wave (each pair of steps then goes step
    by step, the other path of kernels/qcd/qcd.c): the same series as one rank's waves."""
    spec = {"start": "hot", "seed": 3, "sweeps": 2, "or_steps": 1}
    a = qcd(store, 16, (2, 2, 2, 2), **spec)
    b = qcd(store, 1, **spec)
    assert a["verification"] == "passed", a["error"]
    assert a["figures"]["messages_per_sweep"] > 0
    assert [s["plaquette_hex"] for s in a["samples"]] == [s["plaquette_hex"] for s in b["samples"]]


def test_mpich_gives_the_same_series(store) -> None:
    a = qcd(store, 2, (1, 2, 1, 1), mpi="mpich", start="hot", seed=5)
    b = qcd(store, 1, start="hot", seed=5)
    assert a["verification"] == "passed", a["error"]
    assert a["figures"]["plaquette_series"] == b["figures"]["plaquette_series"]


def test_both_builds_of_the_update_give_the_same_bits(store) -> None:
    """AVX2 (where this CPU has it) and the x86-64 baseline build of the update."""
    a = qcd(store, 1, start="hot", seed=9, isa="baseline")
    b = qcd(store, 1, start="hot", seed=9)
    assert a["detail"]["isa"] == "baseline"
    assert a["figures"]["plaquette_series"] == b["figures"]["plaquette_series"]


def test_no_overlap_changes_the_schedule_not_the_numbers(store) -> None:
    a = qcd(store, 2, (2, 1, 1, 1), start="hot", seed=5, overlap=False)
    b = qcd(store, 2, (2, 1, 1, 1), start="hot", seed=5)
    assert a["figures"]["plaquette_series"] == b["figures"]["plaquette_series"]


def test_checkpoint_and_resume_continue_the_series_bit_for_bit(store, tmp_path) -> None:
    ckpt = tmp_path / "field.ckpt"
    whole = qcd(store, 1, sweeps=6, start="hot", seed=3)
    first = qcd(store, 2, (1, 1, 2, 1), sweeps=3, start="hot", seed=3, checkpoint=str(ckpt))
    second = qcd(store, 4, (2, 1, 1, 2), sweeps=3, resume=str(ckpt))
    assert first["status"] == second["status"] == "ok", (first["error"], second["error"])
    assert second["figures"]["plaquette_sweeps"] == [4, 5, 6]
    assert (
        first["figures"]["plaquette_series"] + second["figures"]["plaquette_series"]
        == whole["figures"]["plaquette_series"]
    )
    assert second["figures"]["plaquette_start"] == first["figures"]["plaquette"]

    data = bytearray(ckpt.read_bytes())  # one flipped byte in the links: refused
    data[400] ^= 0x20
    ckpt.write_bytes(bytes(data))
    assert cli.main(["qcd", "--np", "1", "--lattice", "4x4x4x4", "--resume", str(ckpt)]) == 2


def test_corrupted_halo_message_fails_the_run(store) -> None:
    r = qcd(store, 2, (2, 1, 1, 1), inject_fault=True)
    assert r["status"] == "failed" and r["verification"] == "failed"
    assert "checksum mismatch" in r["error"] and "sweep 1" in r["error"]
    assert r["samples"][-1]["halo_ok"] is False
    clean = qcd(store, 2, (2, 1, 1, 1))
    assert clean["status"] == "ok"
    assert r["figures"]["plaquette_series"][0] != clean["figures"]["plaquette_series"][0]


@pytest.mark.parametrize(
    "beta,expected,tol",
    [
        (1.0, 1.0 / 18 + 1.0 / 216, 0.004),  # strong coupling: beta/18 + beta^2/216
        (20.0, 0.8969, 0.003),
    ],  # weak coupling, shared/research/npb-qcd.md section 7 (4^4)
)
def test_heat_bath_matches_the_coupling_expansions(store, beta, expected, tol) -> None:
    r = qcd(store, sweeps=40, beta=beta, start="hot", seed=2, or_steps=1)
    assert r["verification"] == "passed"
    assert statistics.fmean(r["figures"]["plaquette_series"][10:]) == pytest.approx(
        expected, abs=tol
    )


@pytest.mark.parametrize(
    "args,says",
    [
        (["--np", "2", "--grid", "3x1x1x1"], "--grid: 3 processes in direction x do not divide"),
        (["--np", "2", "--grid", "2x2x1x1"], "--grid: 2x2x1x1 is 4 processes, the job has 2"),
        (["--np", "1", "--lattice", "4x4x4x6x"], "--lattice: expected four positive extents"),
        (["--np", "2", "--lattice", "4x4x4x5", "--grid", "2x1x1x1"], "direction t is odd"),
        (["--np", "1", "--beta", "0"], "--beta: must be > 0"),
        (["--np", "1", "--inject-fault"], "--inject-fault"),
        (["--np", "3", "--lattice", "4x4x4x4"], "--np: no np1xnp2xnp3xnp4 grid of 3"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, says, capsys, tmp_path) -> None:
    assert (
        cli.main(
            ["qcd", "--lattice", "4x4x4x4", *args] if "--lattice" not in args else ["qcd", *args]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_resume_refuses_another_beta(store, tmp_path, capsys) -> None:
    ckpt = tmp_path / "c.ckpt"
    assert qcd(store, sweeps=1, checkpoint=str(ckpt))["status"] == "ok"
    assert (
        cli.main(
            ["qcd", "--np", "1", "--lattice", "4x4x4x4", "--resume", str(ckpt), "--beta", "5.7"]
        )
        == 2
    )
    assert "a resumed run must keep them" in capsys.readouterr().err


def test_decompositions_follow_the_papers_table_2() -> None:
    assert study.decompositions(16, (16,) * 4, [1, 2, 3, 4]) == {
        1: (16, 1, 1, 1),
        2: (4, 4, 1, 1),
        3: (4, 2, 2, 1),
        4: (2, 2, 2, 2),
    }
    assert study.decompositions(32, (64, 32, 32, 32), [1, 4]) == {1: (32, 1, 1, 1), 4: (4, 2, 2, 2)}
    # no table for 4 processes: the least halo surface with that many split directions
    assert study.decompositions(4, (8,) * 4, [1, 2, 3]) == {1: (4, 1, 1, 1), 2: (2, 2, 1, 1)}
    assert run.default_grid((8, 8, 8, 8), 4) == (1, 1, 1, 4)  # same surface as 1x1x2x2
    assert run.default_grid((8, 8, 8, 8), 16) == (1, 1, 4, 4)
    assert run.default_grid((4, 4, 4, 16), 4) == (1, 1, 1, 4)


def test_study_and_report_section(store) -> None:
    records = study.run_study(
        local_cluster(), store, np=2, mpi="openmpi", lattice=L4, dims=[1, 2], sweeps=2
    )
    assert [r["params"]["grid"] for r in records] == [[2, 1, 1, 1]]  # 2 ranks: only 1-D
    more = study.run_study(
        local_cluster(), store, np=4, mpi="openmpi", lattice=L4, dims=[1, 2], sweeps=2
    )
    assert study.series_identical(more) is True
    rows = study.rows(more)
    assert [r["dims"] for r in rows] == [1, 2] and all(r["messages_per_sweep"] > 0 for r in rows)
    html = section.render(records + more)
    assert "Decomposition study" in html and "bitwise identical on every grid: yes" in html
    assert "table 5" in html and "<svg" in html
    assert "Which decomposition wins on which network" in html


def test_error_estimate_knows_the_autocorrelation_of_an_ar1_chain() -> None:
    """x_t = rho x_(t-1) + noise has tau_int = (1 + rho) / (2 (1 - rho)): 4.5 at rho 0.8;
    independent values 0.5; the error grows by sqrt(2 tau) over the naive one."""
    import random

    from clustertune.levels.qcd.stats import estimate

    rng = random.Random(4)
    x, chain = 0.0, []
    for _ in range(20000):
        x = 0.8 * x + rng.gauss(0.0, 1.0)
        chain.append(x)
    e = estimate(chain)
    assert e.tau_int == pytest.approx(4.5, rel=0.15)
    assert e.error == pytest.approx(e.naive_error * (2 * e.tau_int) ** 0.5)
    white = estimate([rng.gauss(0.0, 1.0) for _ in range(10000)])
    assert white.tau_int == pytest.approx(0.5, abs=0.1)
    assert white.sigmas_from(0.0) < 4


@pytest.mark.root
def test_study_across_virtual_hosts(store, make_vcluster) -> None:
    """Ranks in network namespaces, halos over the emulated wire: the same series as on
    one rank, and the demo step's records."""
    from clustertune.levels.qcd import demo

    cluster = make_vcluster(hosts=2, link_bps=1_000_000_000)
    records = study.run_study(
        cluster, store, np=4, mpi="openmpi", lattice=L4, dims=[1, 2], sweeps=2, seed=11
    )
    alone = qcd(store, 1, sweeps=2, start="hot", seed=11)
    assert all(r["status"] == "ok" for r in records)
    assert records[0]["figures"]["plaquette_series"] == alone["figures"]["plaquette_series"]
    assert records[0]["params"]["oversubscribed"] is True  # 4 ranks, this machine's 2 cores
    shown = demo.demo(cluster, store)
    assert [r["status"] for r in shown] == ["ok"] * 3
    assert shown[0]["figures"]["plaquette_start"] == 1.0


def _stored_qcd(store, figures: dict, **params) -> dict:
    """A stored ct-qcd record of the given figures, as the runner saves one."""
    params = {"lattice": [4, 4, 4, 4], "grid": [1, 1, 1, 2], "np": 2, "split_dims": 1, **params}
    record = new_record("qcd", "ct-qcd", local_cluster(), params, ["localhost"], 2)
    record.update(status="ok", verification="passed", figures=figures)
    record["id"] = store.save(record)
    return record


def test_old_and_new_records_show_one_qcdflops_definition(store) -> None:
    """Review F8: before 91d10f7 the stored qcdflops_gflops was 5700 x every link update
    (here 1 HB + 4 OR: 5x today's); the readers compute QCDFlops from the heat-bath rate
    that both shapes carry, so the two runs of the same speed show the same figure."""
    rest = (
        "comm_time_s",
        "comm_wait_s",
        "comm_mbps",
        "messages_per_sweep",
        "bytes_per_sweep",
        "unitarity_error",
        "det_error",
        "gauge_invariance_error",
    )
    same = {
        "hb_link_updates_per_s": 1e5,
        "link_updates_per_s": 5e5,
        "time_s": 2.0,
        "compute_time_s": 1.5,
        "counted_gflops": 1.0,
        **dict.fromkeys(rest),
    }
    old = _stored_qcd(store, {**same, "qcdflops_gflops": 2.85, "qcdflops_compute_gflops": 3.8})
    new = _stored_qcd(store, {**same, "qcdflops_gflops": 0.57, "qcdflops_compute_gflops": 0.76})
    table = section.runs_table([old, new])
    assert table.count("<td>0.570</td>") == 2 and table.count("<td>0.760</td>") == 2
    assert "2.850" not in table and "3.800" not in table
    assert all("QCDFlops 0.570 Gflops (0.760 without" in run.text(r) for r in (old, new))
    figures = [row.figure for row in qsummary.rows([old]) + qsummary.rows([new])]
    assert figures == ["5e+05 link updates/s (0.57 QCDFlops G)"] * 2
    # the decomposition study's rows (its table, winners, plot, first-screen row)
    assert [row["qcdflops_gflops"] for row in study.rows([old, new])] == pytest.approx([0.57] * 2)
