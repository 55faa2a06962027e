"""The Linpack tuner: the search space and its derivations on synthetic inputs, the
PyPI OpenBLAS shim, bad input, and tiny end-to-end sessions on this host (a BLAS that
fails its residual check is never chosen) and on a 2-host virtual cluster (root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from clustertune import kernels
from clustertune.levels.linpack import choice, shim
from clustertune.levels.linpack.blas import Blas
from clustertune.levels.tune import hpldat, linpack, space, tcp
from clustertune.levels.tune.space import Config
from clustertune.results import Store

OPENBLAS = "openblas-pthread"
REFERENCE = "blas"


def cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "clustertune.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def check_dat(path: Path, np: int) -> None:
    """The kernel's own HPL.dat reader accepts the file for ``np`` ranks, silently."""
    argv = [
        str(kernels.kernel_path("ct-linpack", "openmpi")),
        "--check-only",
        "--np",
        str(np),
        "--dat",
        str(path),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr


# ------------------------------------------------------------------ the space


def test_grids_are_near_square_flat_first_with_neighbours() -> None:
    assert space.grids(1) == [(1, 1)]
    assert space.grids(2) == [(1, 2), (2, 1)]
    assert space.grids(4) == [(2, 2), (1, 4)]
    assert space.grids(12) == [(3, 4), (2, 6), (4, 3)]
    assert all(p * q == 12 for p, q in space.grids(12))


def test_layouts_use_all_cores_and_fit_a_host() -> None:
    assert space.layouts(2, 2, 1) == [(2, 1), (1, 2)]
    assert space.layouts(4, 2, 2) == [(4, 1), (2, 2)]  # 4 threads would not fit a host
    assert space.layouts(3, 8, 1) == [(3, 1), (1, 3)]
    assert space.layouts(1, 2, 1) == [(1, 1)]


def test_nb_candidates_from_blocking_network_and_n() -> None:
    assert choice.nb_candidates(256, None, 10_000) == [96, 128, 192, 256]
    # n_half 200 KiB: a 128x128 block is 128 KiB (latency-bound), 192x192 288 KiB
    assert choice.nb_candidates(256, 200 * 1024, 10_000) == [192, 256]
    # a huge n_half keeps the largest; a small N drops blocks with fewer than 4 per side
    assert choice.nb_candidates(256, 1e9, 10_000) == [256]
    assert choice.nb_candidates(256, None, 600) == [96, 128]
    assert choice.nb_candidates(256, None, 100) == [96]


def test_n_for_time_scales_as_the_cube_root_and_is_bounded() -> None:
    # 2/3 N^3 / 1e9 Gflop/s = 1 s  ->  N = 1145 -> multiple of 64: 1088
    assert space.n_for_time(1.0, 1.0, 64, 10**6, 64) == 1088
    assert space.n_for_time(1000.0, 100.0, 64, 5000, 64) == 4992
    assert space.n_for_time(0.001, 0.001, 64, 5000, 256) == 256


def test_sample_round_trip_and_ranking() -> None:
    base = Config("/x", 2, 1)
    s = {
        "nb": 64,
        "p": 1,
        "q": 2,
        "depth": 0,
        "bcast": "2ringM",
        "swap": "long",
        "pfact": "crout",
        "rfact": "left",
        "nbmin": 8,
        "ndiv": 2,
    }
    cfg = space.from_sample(base, s)
    assert (cfg.bcast, cfg.swap, cfg.pfact, cfg.rfact, cfg.code()) == (3, 1, 1, 0, "WR03L2C8")
    ms = space.measured([(base, 1.0), (cfg, 3.0), (base, 2.0), (base, 9.0)])
    assert [(m.cfg, m.rates) for m in ms] == [(cfg, (3.0,)), (base, (1.0, 2.0, 9.0))]
    assert (ms[1].median, ms[1].spread) == (2.0, 1.0)  # the spike at 9 does not widen it


def test_beats_only_beyond_the_spread_of_both() -> None:
    a, b = Config("/a", 2, 1), Config("/b", 2, 1)

    def m(cfg, *rates):
        return space.Measured(cfg, rates)

    assert space.beats(m(a, 50, 52), m(b, 40, 41))  # 11 apart, spread 1
    assert not space.beats(m(a, 50, 60), m(b, 40, 50))  # 10 apart, twice the spread 10
    assert not space.beats(m(a, 50.5), m(b, 50.0))  # 1 %: below NOISE with no spread
    assert not space.beats(m(b, 40, 41), m(a, 50, 52))
    # the incumbent stays unless beaten beyond the noise; none measured: the fastest
    assert space.keep_incumbent(m(a, 50, 52), m(b, 40, 41)).cfg == a
    assert space.keep_incumbent(m(a, 50, 60), m(b, 40, 50)).cfg == b
    assert space.keep_incumbent(m(a, 50.5), None).cfg == a


def scale_tuner(monkeypatch, truth, budget_s=600.0):
    """A tuner whose LUs at the scale N give ``truth(cfg)`` per sample, one per value of
    an --nb list and of -N (no kernel runs); the launches are listed."""
    launches: list[Config] = []

    def lu(self, stage, cfg, n, extra=None, timeout=None):
        launches.append(cfg)
        return {"cfg": cfg, "extra": extra or {}}

    def passing(self, record, base):
        extra = record["extra"]
        nbs = [int(v) for v in extra.get("--nb", str(base.nb)).split(",")]
        runs = len(extra.get("-N", "1").split(","))
        return [
            (space.replace(base, nb=nb), truth(space.replace(base, nb=nb)))
            for _ in range(runs)
            for nb in nbs
        ]

    monkeypatch.setattr(linpack.Tuner, "lu", lu)
    monkeypatch.setattr(linpack.Tuner, "passing", passing)
    monkeypatch.setattr(linpack.Tuner, "layouts", lambda self: [(2, 1), (1, 2)])
    return linpack.Tuner(None, None, 2, "openmpi", budget_s), launches


def test_layout_and_nb_are_judged_again_at_scale(monkeypatch) -> None:
    """The search chose 1 rank x 2 threads and NB 128 at a small N; at the scale N 2 x 1
    and NB 192 are faster beyond the noise: both change. Within the noise the confirmed
    layout stays and the evidence says so; with no budget left nothing runs."""
    nb_rate = {96: 60.0, 128: 80.0, 192: 86.0, 256: 75.0}
    confirmed = Config("/x", 1, 2, nb=128, p=1, q=1)
    tuner, launches = scale_tuner(
        monkeypatch, lambda c: nb_rate[c.nb] * (1.0 if c.ranks == 2 else 0.5)
    )
    cfg, rate = tuner.at_scale(confirmed, 40.0, 8000, [96, 128, 192, 256], 60.0)
    assert (cfg.ranks, cfg.threads, cfg.p, cfg.q, cfg.nb, rate) == (2, 1, 1, 2, 192, 86.0)
    assert [(c.ranks, c.threads) for c in launches] == [(1, 2), (2, 1), (2, 1)]
    assert "2x1, NB 192" in tuner.why["at N"] and "at N" not in tuner.noise

    tuner, _ = scale_tuner(monkeypatch, lambda c: 80.0 * (1.0 if c.ranks == 2 else 0.99))
    cfg, _ = tuner.at_scale(confirmed, 40.0, 8000, [128], 60.0)
    assert (cfg.ranks, cfg.threads) == (1, 2) and "kept 1x2" in tuner.noise["at N"]

    tuner, launches = scale_tuner(monkeypatch, lambda c: 80.0, budget_s=1.0)
    assert tuner.at_scale(confirmed, 40.0, 8000, [128, 192], 60.0) == (confirmed, 40.0)
    assert launches == [] and "not re-measured" in tuner.why["at N"]


def test_the_blas_is_judged_again_at_scale(monkeypatch) -> None:
    """The BLAS stage chose /a by a DGEMM of order 1536; /b came within 10 % of it (/c
    did not): at the scale N /b's LU is faster beyond the noise and replaces /a, /c is
    not run. Within the noise /a stays and the evidence says so."""
    from clustertune.levels.linpack.blas import Blas

    confirmed = Config("/a", 2, 1, nb=192, p=1, q=2)

    def tuner_for(lu_rate):
        tuner, launches = scale_tuner(monkeypatch, lambda c: lu_rate[c.blas])
        tuner.blas_rates = {"/a": 100.0, "/b": 95.0, "/c": 70.0}
        tuner._blases = {k: Blas(k.strip("/"), Path(k)) for k in tuner.blas_rates}
        monkeypatch.setattr(linpack.Tuner, "layouts", lambda self: [(2, 1)])
        return tuner, launches

    tuner, launches = tuner_for({"/a": 70.0, "/b": 80.0, "/c": 99.0})
    cfg, rate = tuner.at_scale(confirmed, 40.0, 8000, [192], 60.0)
    assert (cfg.blas, rate) == ("/b", 80.0) and "/c" not in {c.blas for c in launches}
    assert "b 80.0" in tuner.why["at N"] and "BLAS at N" not in tuner.noise
    tuner, _ = tuner_for({"/a": 79.5, "/b": 80.0, "/c": 99.0})
    cfg, _ = tuner.at_scale(confirmed, 40.0, 8000, [192], 60.0)
    assert cfg.blas == "/a" and "kept a" in tuner.noise["BLAS at N"] in tuner.why["at N"]


def test_confirmation_duels_the_final_two_within_the_noise(monkeypatch) -> None:
    """The confirmation's two best within each other's noise get DUEL_ROUNDS more launches
    each, alternating, and the descent's result stays unless beaten; clearly apart, no
    more launches and the faster wins."""
    found, other = Config("/x", 2, 1, nb=128, p=1, q=2), Config("/x", 2, 1, nb=96, p=1, q=2)
    for rates, launched, chosen in (
        ({found: 50.0, other: 50.5}, 4 + 2 * linpack.DUEL_ROUNDS, found),
        ({found: 50.0, other: 60.0}, 4, other),
    ):
        tuner, launches = scale_tuner(monkeypatch, rates.__getitem__)
        tuner.trials = [(other, 1.0)]
        cfg, rate, _ = tuner.confirm(found, 50.0, 1536)
        assert (cfg, len(launches)) == (chosen, launched)
        assert launches[4:] == [found, other, other, found][: launched - 4]


def test_samples_fill_a_launch_of_the_asked_length() -> None:
    # N=1000 at 2/3 Gflop/s: one LU is 1 s
    assert space.samples_for(1000, 2 / 3, 3.0, 8) == 3
    assert space.samples_for(1000, 2 / 3, 0.5, 8) == 1
    assert space.samples_for(1000, 2 / 3, 100.0, 8) == 8


def test_hpl_dat_is_read_back_by_the_kernel(tmp_path) -> None:
    cfg = Config("/x", 4, 1, nb=128, p=2, q=2, depth=0, bcast=5, swap=1, pfact=0, rfact=1)
    path = tmp_path / "HPL.dat"
    path.write_text(hpldat.text(cfg, 4096))
    check_dat(path, 4)
    lines = path.read_text().splitlines()
    assert lines[5].split()[0] == "4096" and lines[7].split()[0] == "128"
    assert [lines[i].split()[0] for i in (10, 11, 22, 25)] == ["2", "2", "5", "1"]
    with pytest.raises(AssertionError):  # and the check would catch a grid too large
        check_dat(path, 2)


def test_descent_finds_a_separable_optimum_and_stops_early(monkeypatch) -> None:
    """Coordinate descent on a synthetic rate whose optimum is known: one pass finds it,
    the second gains nothing and ends the search (early stopping)."""
    best = {"nb": 192, "depth": 1, "bcast": 3, "swap": 0, "pfact": 1, "rfact": 2, "nbmin": 2}

    def rate(cfg: Config) -> float:
        return 100.0 - sum(abs(getattr(cfg, k) - v) for k, v in best.items()) - 3 * (cfg.p > 1)

    calls = []

    def sweep(self, stage, cfg, n, dim, values):
        calls.append(dim)
        if dim == "grid":
            got = [space.replace(cfg, p=p, q=q) for p, q in values]
        else:
            got = [space.replace(cfg, **{dim: v}) for v in values]
        return max(((c, rate(c)) for c in got), key=lambda t: t[1])

    monkeypatch.setattr(linpack.Tuner, "sweep", sweep)
    tuner = linpack.Tuner(None, None, 2, "openmpi", 600.0)
    cfg, got = tuner.descend(Config("/x", 2, 1), 80.0, 1000, [96, 128, 192, 256])
    assert got == 100.0 and {k: getattr(cfg, k) for k in best} == best and cfg.p == 1
    assert tuner.passes == 2 and len(calls) == 16  # 8 dimensions, twice

    # the machine gets slower with every launch (others start jobs): each sweep's best,
    # measured beside the incumbent in the same launch, still wins
    load = iter(0.5**i for i in range(100))
    monkeypatch.setattr(
        linpack.Tuner, "sweep", lambda *a: (lambda c, r: (c, r * next(load)))(*sweep(*a))
    )
    cfg, _ = linpack.Tuner(None, None, 2, "openmpi", 600.0).descend(
        Config("/x", 2, 1), 200.0, 1000, [96, 128, 192, 256]
    )
    assert {k: getattr(cfg, k) for k in best} == best


def test_sweep_decides_only_beyond_the_noise_and_records_what_it_did_not(monkeypatch) -> None:
    """A value whose samples beat the incumbent's clearly is taken from one launch; values
    within the noise of the fastest are measured again, in reverse order, and if still
    within the noise the incumbent stays and the evidence says so; a sweep where nothing
    passed changes nothing."""
    launches: list[tuple[list, int]] = []
    truth: dict = {}  # each value's next samples

    def launch_values(self, stage, cfg, n, dim, values, samples):
        launches.append((list(values), samples))
        return [
            (space.replace(cfg, **{dim: v}), truth[v].pop(0))
            for v in values
            for _ in range(samples)
            if truth[v]
        ]

    monkeypatch.setattr(linpack.Tuner, "launch_values", launch_values)
    tuner = linpack.Tuner(None, None, 2, "openmpi", 600.0)
    inc = Config("/x", 2, 1, depth=1)
    truth.update({0: [30.0, 31.0], 1: [40.0, 41.0], 2: [60.0, 61.0]})
    assert tuner.sweep("s", inc, 1000, "depth", [0, 1, 2]) == (space.replace(inc, depth=2), 60.5)
    assert launches == [([0, 1, 2], 2)] and "depth" not in tuner.noise

    launches.clear()  # 2 is faster in the first launch, but by less than the spread
    truth.update({0: [30.0, 31.0], 1: [40.0, 44.0, 42, 38, 43], 2: [46.0, 41.0, 39, 45, 44]})
    cfg, rate = tuner.sweep("s", inc, 1000, "depth", [0, 1, 2])
    assert cfg == inc and rate == 42.0
    assert launches == [([0, 1, 2], 2), ([2, 1], linpack.CLOSE_SAMPLES)]
    assert "within the noise, kept 1" in tuner.noise["depth"]

    # a second pass that decides the dimension clears the first pass's note
    truth.update({0: [30.0, 31.0], 1: [40.0, 41.0], 2: [60.0, 61.0]})
    assert tuner.sweep("s", inc, 1000, "depth", [0, 1, 2])[0].depth == 2
    assert "depth" not in tuner.noise

    assert tuner.sweep("s", inc, 1000, "depth", [0, 1, 2]) is None


def gemm_record(wall: float, cpu: float | None = None) -> dict:
    """A passing ct-gemm --local record of one product: its wall-clock and CPU-time rates."""
    sample = {"dtype": "d", "n": 1536, "passed": True, "gflops": wall, "cpu_gflops": cpu or wall}
    return {
        "status": "ok",
        "kernel": "ct-gemm",
        "samples": [sample],
        "figures": {"best_dgemm_gflops": wall},
    }


def stub_blas_stage(monkeypatch, cands, dgemm) -> linpack.Tuner:
    """A tuner whose candidates are ``cands`` and whose DGEMM is ``dgemm(blas, repeat)``."""

    def candidates(self):
        self._blases = {b.key: b for b in cands}
        return cands

    monkeypatch.setattr(linpack.Tuner, "candidates", candidates)
    monkeypatch.setattr(linpack.Tuner, "dgemm", lambda self, b, repeat: dgemm(b, repeat))
    monkeypatch.setattr(linpack.Tuner, "lu", lambda self, *a, **k: {"status": "ok"})
    return linpack.Tuner(None, None, 2, "openmpi", 600.0)


def test_blas_choice_remeasures_an_openblas_other_core(monkeypatch) -> None:
    """A load spike during the single product of one core of an OpenBLAS (below half the
    best) does not decide the core: both cores of that library are measured again, best
    of 3, and the faster on that evidence is chosen; a library far below is not."""
    lib, slow = Path("/x/openblas-pthread"), Path("/x/blas")
    cands = [Blas("OpenBLAS", lib, "Zen"), Blas("OpenBLAS", lib, "Haswell"), Blas("ref", slow)]
    first = {"/x/openblas-pthread#Zen": 20.0, "/x/openblas-pthread#Haswell": 45.0, "/x/blas": 2.0}
    again = {"/x/openblas-pthread#Zen": 50.0, "/x/openblas-pthread#Haswell": 46.0, "/x/blas": 2.0}
    calls: list[tuple[str, int]] = []

    def dgemm(b, repeat):
        calls.append((b.key, repeat))
        return gemm_record((first if repeat == 1 else again)[b.key])

    tuner = stub_blas_stage(monkeypatch, cands, dgemm)
    best, rate = tuner.choose_blas()
    assert (best.coretype, rate) == ("Zen", 50.0)
    assert sorted(k for k, r in calls if r == 3) == [
        "/x/openblas-pthread#Haswell",
        "/x/openblas-pthread#Zen",
    ]
    assert "OpenBLAS (Zen kernels): DGEMM 50.0" in tuner.why["blas"]


def test_the_tuners_blas_stage_ranks_by_cpu_time_and_sizes_by_wall_clock(monkeypatch) -> None:
    """At load 16 the tuner's wall-clock DGEMM put BLIS (12.0 Gflop/s) above OpenBLAS
    (11.5), whose CPU-time rate was 10 % above BLIS's: the stage now ranks by CPU time
    like the host's choice, and returns the wall-clock rate, which sizes the search."""
    cands = [Blas("BLIS", Path("/x/blis")), Blas("OpenBLAS", Path("/x/ob"), "Zen")]
    wall = {"/x/blis": 12.0, "/x/ob#Zen": 11.5}
    cpu = {"/x/blis": 90.0, "/x/ob#Zen": 100.0}
    tuner = stub_blas_stage(
        monkeypatch, cands, lambda b, repeat: gemm_record(wall[b.key], cpu[b.key])
    )
    best, rate = tuner.choose_blas()
    assert (best.key, rate) == ("/x/ob#Zen", 11.5)
    assert tuner.blas_rates == cpu and tuner.blas_wall == wall
    assert "DGEMM 100.0 Gflop/s by CPU time (11.5 by wall clock)" in tuner.why["blas"]


def test_the_tuner_keeps_the_hosts_default_blas_within_its_noise(monkeypatch) -> None:
    """The demo's tuner took PyPI OpenBLAS (SkylakeX) at 105.8 Gflop/s over the host's
    measured default (Debian's, Cooperlake) at 105.7, so its row named another core than
    the host's choice: within 2 % the default stays; beyond it the fastest is taken."""
    deb, pypi = Path("/x/openblas-pthread"), Path("/x/scipy-openblas")
    cands = [Blas("OpenBLAS", deb, "Cooperlake"), Blas("OpenBLAS (PyPI)", pypi, "SkylakeX")]
    monkeypatch.setattr(
        linpack, "blas_choice", lambda: {"directory": str(deb), "coretype": "Cooperlake"}
    )

    def chosen(pypi_rate: float) -> str:
        cpu = {"/x/openblas-pthread#Cooperlake": 105.7, "/x/scipy-openblas#SkylakeX": pypi_rate}
        tuner = stub_blas_stage(monkeypatch, cands, lambda b, repeat: gemm_record(cpu[b.key]))
        return tuner.choose_blas()[0].key

    assert chosen(105.8) == "/x/openblas-pthread#Cooperlake"
    assert chosen(112.0) == "/x/scipy-openblas#SkylakeX"
    monkeypatch.setattr(linpack, "blas_choice", lambda: None)  # no default measured here
    assert chosen(105.8) == "/x/scipy-openblas#SkylakeX"


def test_the_hpl_dats_nb_far_beyond_the_measured_n_is_the_default_model(monkeypatch) -> None:
    """At 80 % of memory (N=50176) the tuner's NB 128, judged at N=11776, made 0.913 of
    DGEMM and the default's NB 256 0.960: far beyond every N it measured, the HPL.dat
    takes the NB a default run picks from the host default's rank-K rates; near it, or
    with another BLAS than the host default (no rates for it), the tuner's own."""
    default = Blas("OpenBLAS", Path("/o"), "SkylakeX")
    monkeypatch.setattr(
        linpack,
        "blas_choice",
        lambda: {
            "directory": "/o",
            "coretype": "SkylakeX",
            "rank_k_gflops": {"64": 97.0, "96": 100.3, "128": 103.5, "192": 105.0, "256": 107.6},
        },
    )
    tuner = linpack.Tuner(None, None, 2, "openmpi", 600.0)
    monkeypatch.setattr(linpack.Tuner, "memory_n", lambda self, nb: 50176)
    ran: list[tuple[Config, int]] = []
    passes = {256: True}

    def lu(self, stage, cfg, n):  # the session rests on a run of the HPL.dat's settings
        ran.append((cfg, n))
        return {"status": "ok" if passes.get(cfg.nb) else "failed", "cfg": cfg}

    monkeypatch.setattr(linpack.Tuner, "lu", lu)
    monkeypatch.setattr(
        linpack.Tuner,
        "passing",
        lambda self, record, base: [(record["cfg"], 100.0)] if record["status"] == "ok" else [],
    )
    cfg = Config(default.key, 2, 1, nb=128, p=1, q=2)
    assert tuner.nb_for_memory_n(cfg, default, 11776, None).nb == 256
    assert ran == [(replace(cfg, nb=256), 11776)]
    assert "256 for N=50176" in tuner.why["NB"] and "judged at N=11776" in tuner.why["NB"]
    passes[256] = False  # a modelled NB whose run fails is not taken
    assert tuner.nb_for_memory_n(cfg, default, 11776, None) == cfg
    assert "did not pass its run" in tuner.why["NB"]
    assert tuner.nb_for_memory_n(cfg, default, 30000, None) == cfg  # within 2x: measured
    other = Blas("BLIS", Path("/b"))
    assert tuner.nb_for_memory_n(replace(cfg, blas=other.key), other, 11776, None).nb == 128


def test_demo_step_goes_on_when_the_default_pingpong_failed(monkeypatch, capsys) -> None:
    """A failed default-buffer ping-pong (tune tcp exits 1 for it) is said by the demo's
    tuning step, which returns the runs so far and the failed one for the report."""
    from types import SimpleNamespace

    from clustertune.levels.tune import demo

    failed = {"id": 9, "status": "failed", "error": "no bytes came back\nmore"}
    qcd_summary = {"runs": [1]}

    def base_failed(*args):
        raise tcp.BaseFailed(failed)

    monkeypatch.setattr(demo.qcd, "tune", lambda *a, **k: qcd_summary)
    monkeypatch.setattr(demo.cli, "store_qcd", lambda *a: {"id": 2})
    monkeypatch.setattr(demo.cli, "qcd_text", lambda *a: "qcd tuned")
    monkeypatch.setattr(demo, "tune_linpack", lambda *a: [{"id": 3}])
    monkeypatch.setattr(demo.tcp, "tune", base_failed)
    store = SimpleNamespace(get=lambda i: {"id": i})
    hosts = [SimpleNamespace(name="host0"), SimpleNamespace(name="host1")]
    cluster = SimpleNamespace(mpi=["openmpi"], hosts=hosts)
    assert [r["id"] for r in demo.demo(cluster, store)] == [1, 2, 3, 9]
    assert "tune tcp: the default-buffer ping-pong (run 9) gave no bandwidth: no bytes" in (
        capsys.readouterr().err
    )


# ------------------------------------------------------------------ the shim


def test_pypi_openblas_shim_forwards_the_fortran_blas() -> None:
    blas = shim.scipy_openblas()
    if blas is None:
        pytest.skip("scipy-openblas32 not installed (make setup)")
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(blas.library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split()[-1] for line in out.splitlines()}
    assert {"dgemm_", "dtrsm_", "idamax_", "openblas_get_corename"} <= names
    assert "PyPI" in blas.name and blas.directory.parent == shim.shim_root()


def test_openblas_candidates_run_the_core_they_name() -> None:
    """Each OpenBLAS is a candidate with the core it picks itself and with each forced
    core the CPU's ISA can run (Haswell on AVX2; SkylakeX, Cooperlake with AVX-512 and
    BF16), once each; a run with a candidate's environment reports that core, whatever
    OPENBLAS_CORETYPE the caller has (a user may export Haswell); a singleton MPI
    process each."""
    from clustertune import hostinfo
    from clustertune.levels.linpack import blas as blaslib

    found = {b.directory.name: b for b in blaslib.installed()}
    if OPENBLAS not in found:
        pytest.skip("Debian's OpenBLAS not installed")
    variants = blaslib.core_variants(found[OPENBLAS])
    cores = [v.coretype for v in variants]
    isa = set(hostinfo.cpu_info()["isa"])
    runnable = [c for c, needs in blaslib.FORCED_CORES.items() if isa.issuperset(needs)]
    assert cores[0] and cores == list(dict.fromkeys([cores[0], *runnable]))
    assert ("Haswell" in cores) == ({"avx2", "fma"} <= isa)
    assert len({v.key for v in variants}) == len(variants)
    if REFERENCE in found:
        assert blaslib.core_variants(found[REFERENCE]) == [found[REFERENCE]]  # not OpenBLAS
    for v in variants:
        env = {**os.environ, **blaslib.environment(v), "OPENBLAS_NUM_THREADS": "1"}
        argv = [
            str(kernels.kernel_path("ct-gemm", "openmpi")),
            "-N",
            "64",
            "--type",
            "d",
            "--local",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        result = [json.loads(line) for line in done.stdout.splitlines() if '"result"' in line]
        assert done.returncode == 0 and result, done.stderr[-1000:]
        assert result[-1]["detail"]["blas"]["core"].lower() == v.coretype.lower()


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "args, said",
    [
        (["--budget", "0"], "--budget"),
        (["--mem-fraction", "1.5"], "--mem-fraction"),
        (["--n-search", "10"], "--n-search"),
        (["--np", "0"], "--np"),
        (["--out", "/nonexistent/dir/HPL.dat"], "--out"),
        (["--blas", "nosuch"], "--blas"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_stored(tmp_path, args, said) -> None:
    db = tmp_path / "r.db"
    proc = cli("tune", "linpack", "--db", str(db), *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert not db.exists() or Store(db).list() == []


# ------------------------------------------------------------------ end to end


def test_tiny_session_never_chooses_a_blas_that_fails_verification(tmp_path) -> None:
    """OpenBLAS is much faster than the reference BLAS, but its LU is made to fail its
    residual check (--inject-fault through the test knob): it is excluded, the reference
    is chosen, every trial is a stored record of the session, and the HPL.dat runs."""
    db, out = tmp_path / "r.db", tmp_path / "HPL.dat"
    proc = cli(
        "tune",
        "linpack",
        "--db",
        str(db),
        "--np",
        "2",
        "--budget",
        "0.1",
        "--n-search",
        "256",
        "--n-confirm",
        "512",
        "--blas",
        f"{OPENBLAS},{REFERENCE}",
        "--out",
        str(out),
        "--json",
        env={linpack.INJECT_ENV: OPENBLAS},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert Path(doc["blas_directory"]).name == REFERENCE
    # every OpenBLAS candidate (its own core, Haswell) excluded, nothing else
    assert doc["excluded"] and all(e.startswith("OpenBLAS") for e in doc["excluded"])
    assert all("verification failed" in e for e in doc["excluded"])
    assert doc["env"]["LD_LIBRARY_PATH"].endswith(REFERENCE) and "env" in doc["why"]
    assert all(
        k in doc["why"] for k in ("blas", "layout", "N", "NB", "PxQ", "BCAST", "confirm", "at N")
    )
    store = Store(db)
    trials = [r for r in store.list("linpack") if r["params"].get("tune") == doc["session"]]
    assert sorted(r["id"] for r in trials) == sorted(doc["runs"])
    bad = [r for r in trials if r["params"]["blas"]["directory"].endswith(OPENBLAS)]
    assert any(r["status"] == "failed" and r["verification"] == "failed" for r in bad)
    assert all(
        r["params"]["blas"]["directory"].endswith(REFERENCE)
        for r in trials
        if r["params"]["stage"] != "blas"
    )
    (summary,) = store.list("tune")
    assert summary["status"] == "ok" and summary["detail"]["session"] == doc["session"]
    cfg = doc["config"]
    check_dat(out, cfg["ranks"])
    run = cli(
        "linpack",
        "--db",
        str(db),
        "--np",
        str(cfg["ranks"]),
        "--dat",
        str(out),
        "-N",
        "512",
        "--json",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    ran = json.loads(run.stdout)["results"][0]
    assert (ran["nb"], ran["p"], ran["q"]) == (cfg["nb"], cfg["p"], cfg["q"])


@pytest.mark.root
def test_tiny_session_on_a_two_host_virtual_cluster(make_vcluster, tmp_path, store) -> None:
    cluster = make_vcluster(hosts=2)
    tuner = linpack.Tuner(
        cluster,
        store,
        2,
        "openmpi",
        6.0,
        n_search=256,
        n_confirm=512,
        blas_filter=OPENBLAS,
        timeout=120,
    )
    summary = tuner.tune()
    records = [store.get(i) for i in summary["runs"]]
    assert all(r["params"]["tune"] == tuner.session for r in records)
    assert any(
        r["status"] == "ok"
        and r["meta"]["cluster"]["name"] == cluster.name
        and len(r["meta"]["hosts"]) == 2
        for r in records
    )
    out = tmp_path / "HPL.dat"
    out.write_text(summary["hpl_dat"])
    check_dat(out, summary["config"]["ranks"])
    assert summary["gflops_confirm"] > 0


# ------------------------------------------------------------------ tune tcp


def test_tcp_candidates_bracket_the_bandwidth_delay_product() -> None:
    # 100 Mbit/s x 4.4 ms = 55 KB: from BDP/4 (16 KiB) to 8 x BDP (256 KiB)
    assert tcp.candidates(55_000) == [16384 << i for i in range(5)]
    assert tcp.candidates(100) == [4096, 8192, 16384]  # 4 KiB floor, at least 4x it


def test_tcp_choice_keeps_the_default_unless_a_size_beats_it() -> None:
    sweep = [(16384, 33.0), (32768, 74.0), (65536, 95.1), (131072, 95.2)]
    assert tcp.choose(95.0, sweep) == (None, 95.0)  # autotuning reaches it: keep it
    assert tcp.choose(40.0, sweep) == (65536, 95.1)  # the smallest within 3 % of the best


def test_tune_tcp_exits_1_naming_the_run_when_its_session_failed_verification(
    monkeypatch, capsys
) -> None:
    """As tune linpack and tune qcd: a session whose chosen size's ping-pong failed
    verification is a failed record, exit 1, and the text names the run (it exited 0)."""
    from clustertune import cli
    from clustertune.cluster import Cluster, Host, Site
    from clustertune.levels.tune import cli as tune_cli
    from clustertune.runner import new_record

    cluster = Cluster("h9pair", (Host("a"), Host("b")), (Site("site0", "local"),))
    store = Store()  # the private database the CLI below uses too

    def pingpong(sockbuf, verification):
        record = new_record("network", "ct-tcp-pingpong", cluster, {"sockbuf": sockbuf}, ["a", "b"])
        ok = verification == "passed"
        record.update(status="ok" if ok else "failed", verification=verification)
        return store.save(record)

    def session(verification):
        runs = [pingpong(None, "passed"), pingpong(16384, "passed"), pingpong(65536, verification)]
        return lambda *a: {
            "session": "s1",
            "pair": ["a", "b"],
            "bdp_bytes": 20_000.0,
            "mbps": 95.0,
            "sockbuf": 65536,
            "sysctl": [],
            "lines": ["choose 64 KiB"],
            "runs": runs,
        }

    monkeypatch.setattr(tune_cli, "cluster_of", lambda args: cluster)
    monkeypatch.setattr(tcp, "tune", session("failed"))
    assert cli.main(["tune", "tcp"]) == 1
    failed = store.list("tune")[-1]
    assert failed["status"] == "failed"
    out = capsys.readouterr().out
    assert f"run {failed['detail']['runs'][2]} of the chosen settings is failed" in out, out
    monkeypatch.setattr(tcp, "tune", session("passed"))  # the same session verified: exit 0
    assert cli.main(["tune", "tcp"]) == 0
    assert "session failed" not in capsys.readouterr().out


def test_tune_tcp_exits_1_when_its_first_pingpong_failed(monkeypatch, capsys) -> None:
    """A failed measurement exits 1 (README: a run that is not ok), not 2 (bad input): the
    default-buffer ping-pong that gave no bandwidth was a UserError, exit 2."""
    from clustertune import cli
    from clustertune.cluster import Cluster, Host, Site
    from clustertune.levels.tune import cli as tune_cli
    from clustertune.runner import new_record

    cluster = Cluster("fpair", (Host("a"), Host("b")), (Site("site0", "local"),))
    store = Store()  # the private database the CLI below uses too

    def failed_pingpong(cluster_, store_, spec):
        record = new_record("network", "ct-tcp-pingpong", cluster, {}, ["a", "b"])
        record.update(status="failed", error="ct-tcp-pingpong: connection refused\nmore")
        record["id"] = store.save(record)
        return record

    monkeypatch.setattr(tune_cli, "cluster_of", lambda args: cluster)
    monkeypatch.setattr(tcp.network, "bandwidth_min_size", lambda *a: None)
    monkeypatch.setattr(tcp.network, "run_pingpong", failed_pingpong)
    assert cli.main(["tune", "tcp"]) == 1
    run = store.list("network")[-1]["id"]
    assert capsys.readouterr().out.strip() == (
        f"tune tcp: the default-buffer ping-pong (run {run}) gave no bandwidth: "
        "ct-tcp-pingpong: connection refused"
    )


@pytest.mark.root
def test_tune_tcp_on_a_slow_long_link(make_vcluster, store) -> None:
    """100 Mbit/s with 2 ms each way: each candidate buffer is applied at both ends, the
    smallest (16 KiB) holds a fraction of the ~50 kB in flight and is slower than the best;
    every ping-pong is a stored record. (0.5 ms each way from ab46901 until the wire held
    its delay in the switch: on the sender it capped one flow at ~20 Mbit/s, issue 19.)"""
    cluster = make_vcluster(hosts=2, link_bps=100_000_000, delay_us=2000)
    a, b = (h.name for h in cluster.hosts)
    summary = tcp.tune(cluster, store, a, b, None)
    assert 40_000 < summary["bdp_bytes"] < 70_000
    runs = [store.get(i) for i in summary["runs"]]
    assert [r["status"] for r in runs] == ["ok"] * len(runs)
    # The buffer is applied whatever the load (review F10): the 16 KiB run's sockets, both
    # ends, read back 32 KiB (Linux doubles what setsockopt asks), the default run's do not.
    effective = ("sockbuf_effective_snd", "sockbuf_effective_rcv")
    effective += tuple(f"server_{key}" for key in effective)
    small = next(r for r in runs if r["params"]["sockbuf"] == 16384)
    assert {small["detail"][key] for key in effective} == {2 * 16384}, small["detail"]
    assert runs[0]["params"]["sockbuf"] is None
    assert {runs[0]["detail"][key] for key in effective} != {2 * 16384}, runs[0]["detail"]
    rates = dict(summary["sweep"])
    # 16 KiB (32 KiB applied) per round trip of at least 4 ms carries at most 65 Mbit/s
    assert rates[16384] < 65, rates
    if max(rates.values()) < 50:  # a starved wire: nothing to compare the small one with
        pytest.skip(
            f"buffers applied (checked), but the link was too starved to compare their rates: "
            f"best {max(rates.values()):.0f} Mbit/s < 50: {rates}"
        )
    assert rates[16384] < 0.8 * max(rates.values()), rates


def test_section_shows_each_choice_and_the_hpl_dat() -> None:
    from clustertune.levels.tune import section

    cfg = Config("/x", 2, 1)
    detail = {
        "session": "s1",
        "gflops_confirm": 50.0,
        "n_confirm": 4000,
        "dgemm_gflops": 70.0,
        "why": {"blas": "OpenBLAS <fast>", "NB": "192 because"},
        "runs": [1, 2],
        "hpl_dat": hpldat.text(cfg, 1000),
    }
    html = section.render([{"started": "t", "params": {"what": "linpack"}, "detail": detail}])
    assert "OpenBLAS &lt;fast&gt;" in html and "192 because" in html and "HPLinpack" in html
    assert html.index("<td>blas</td>") < html.index("<td>NB</td>")


def test_the_bench_says_which_blas_each_side_of_the_hpcc_ratio_ran(monkeypatch, capsys) -> None:
    """bench/tune_linpack.py's peak: hpcc as shipped runs the system's BLAS, ours the
    tuned one; the RATIO line names both, and hpcc runs with the tuned BLAS too, for a
    same-BLAS ratio (canned rates: nothing runs)."""
    import argparse

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import tune_linpack

    from clustertune.levels.linpack.blas import Blas

    hpcc = tune_linpack.hpcc
    tuned_dir = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
    tuned_env = {"LD_LIBRARY_PATH": tuned_dir, "OPENBLAS_CORETYPE": "SkylakeX"}
    monkeypatch.setattr(hpcc, "run_dgemm", lambda *a: 100.0)
    monkeypatch.setattr(
        hpcc, "run_ct_linpack", lambda *a: ({"gflops": 90.0, "passed": True, "phase_stats": {}}, {})
    )
    # hpcc: 60 Gflop/s with its own BLAS, 80 with the tuned one
    monkeypatch.setattr(
        hpcc,
        "run_hpcc",
        lambda dat, np, env, t: {
            "gflops": 80.0 if env.get("LD_LIBRARY_PATH") == tuned_dir else 60.0,
            "passed": True,
        },
    )
    monkeypatch.setattr(hpcc, "environment", lambda: {"OPENBLAS_CORETYPE": "Haswell"})
    monkeypatch.setattr(tune_linpack, "peak_n", lambda *a: (2000, "test"))

    class Tuner:
        def blas_of(self, key):
            return Blas("OpenBLAS", Path(tuned_dir), "SkylakeX")

        def env(self, blas, threads):
            return dict(tuned_env)

    args = argparse.Namespace(
        dgemm_n=1000, np=2, timeout=60, growth="", peak_repeat=2, memory_run=False, mem_fraction=0.8
    )
    cfg = Config(tuned_dir + "#SkylakeX", 2, 1)
    got = tune_linpack.peak(args, Tuner(), cfg, {"blas_rates": {cfg.blas: 1.0}, "n": 4000})
    out = capsys.readouterr().out
    ratios = [line for line in out.splitlines() if line.startswith("RATIO")]
    shipped = next(line for line in ratios if "hpcc as shipped" in line)
    assert "core SkylakeX" in shipped and "core Haswell" in shipped and "1.500" in shipped
    same = next(line for line in ratios if "same BLAS" in line)
    assert "core SkylakeX" in same and "1.125" in same
    assert got["vs_hpcc_same_blas"] == pytest.approx(90.0 / 80.0)


def test_tuned_tcp_row_reads_the_chosen_buffer_against_the_links_payload() -> None:
    """The first screen reads the tuner's TCP figure as the network level reads a ping-pong:
    against the link's TCP payload (941 Mbit/s at 1 Gbit), so a figure no wire can carry is
    flagged there too; the demo's row read "1gbit nominal" beside "1gbit (payload 941)"."""
    from clustertune import summary
    from clustertune.levels.tune import summary as tune_summary

    detail = {"pair": ["host0", "host1"], "sockbuf": None, "mbps": 906.0, "rate_bps": 10**9}
    row = tune_summary.tcp_row(detail, "demo")
    assert (row.figure, row.reference) == ("default: 906 Mbit/s", "1gbit (payload 941)")
    assert (row.verdict, row.state, row.ratio) == ("in line", summary.GOOD, 0.906)
    row = tune_summary.tcp_row(detail | {"sockbuf": 65536, "mbps": 1070.0}, "demo")
    assert (row.verdict, row.state) == ("above payload ceiling", summary.WARN)
    row = tune_summary.tcp_row(detail | {"rate_bps": None}, "demo")  # unshaped: no reference
    assert (row.reference, row.verdict, row.ratio) == ("", "chosen", None)
