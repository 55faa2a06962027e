"""``clustertune tune qcd``: the candidate decompositions (one per class of axis
permutations, least halo first), the choice (a grid whose run failed is never chosen),
bad input before anything runs, and a tiny session on this host whose fastest-looking
candidate fails its own check (a corrupted halo message): the other grid is chosen, every
run is stored, and the report section shows the lines."""

from __future__ import annotations

import json

import pytest

from clustertune import cli
from clustertune.errors import UserError
from clustertune.levels.qcd import api as qcd_level  # what the tuner calls
from clustertune.levels.tune import qcd
from clustertune.results import Store


def test_candidates_one_per_permutation_class_least_halo_first() -> None:
    # 8^4 on 4 ranks: 4 (1-D) and 2x2 (2-D) have the same halo; 1-D has fewer messages
    assert qcd.candidates(4, (8, 8, 8, 8)) == [(1, 1, 1, 4), (1, 1, 2, 2)]
    # 16^4 on 16 ranks: 16, 8x2, 4x4, 4x2x2, 2x2x2x2, each once, least halo first
    got = qcd.candidates(16, (16, 16, 16, 16), limit=10)
    assert sorted(sorted(g) for g in got) == [
        [1, 1, 1, 16],
        [1, 1, 2, 8],
        [1, 1, 4, 4],
        [1, 2, 2, 4],
        [2, 2, 2, 2],
    ]
    halos = [qcd_level.halo_sites((16,) * 4, g) for g in got]
    assert halos == sorted(halos)
    assert got[0] == (1, 1, 4, 4)  # the same halo as 2x2x2x2, fewer split directions
    assert qcd.candidates(16, (16, 16, 16, 16), limit=2) == got[:2]
    # a long t: splitting it halves the halo of splitting x
    assert qcd.candidates(2, (4, 4, 4, 8)) == [(1, 1, 1, 2), (1, 1, 2, 1)]
    with pytest.raises(UserError, match="divides the lattice"):
        qcd.candidates(3, (8, 8, 8, 8))


def test_choice_is_the_best_run_of_grids_that_never_failed() -> None:
    a, b, c = (1, 1, 1, 4), (1, 1, 2, 2), (1, 2, 2, 1)
    assert qcd.choose({a: [1.0, 1.5], b: [1.4]}) == a  # best of its runs
    assert qcd.choose({a: [9.0, None], b: [1.4], c: [None]}) == b  # a failed run excludes
    assert qcd.choose({a: [None]}) is None


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--np", "3"], "divides the lattice"),
        (["--lattice", "8x8x8"], "--lattice"),
        (["--np", "0"], "--np"),
        (["--sweeps", "0"], "--sweeps"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_stored(tmp_path, capsys, args, said) -> None:
    db = tmp_path / "bad.db"
    assert cli.main(["tune", "qcd", "--db", str(db), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err
    assert not db.exists() or Store(db).list() == []


def test_tiny_session_never_chooses_a_grid_that_fails_its_check(tmp_path, capsys, monkeypatch):
    """4x4x4x8 on 2 ranks: two classes (split t, split z). The first measured (split t,
    the least halo) corrupts a halo message, so its run fails; the other is chosen."""
    real = qcd_level.run_qcd
    bad = qcd.candidates(2, (4, 4, 4, 8))[0]

    def faulty(cluster, store, spec, **kw):
        if spec.grid == bad:
            spec.inject_fault = True
        return real(cluster, store, spec, **kw)

    monkeypatch.setattr(qcd_level, "run_qcd", faulty)
    db = tmp_path / "t.db"
    code = cli.main(
        [
            "tune",
            "qcd",
            "--np",
            "2",
            "--lattice",
            "4x4x4x8",
            "--sweeps",
            "1",
            "--or-steps",
            "1",
            "--db",
            str(db),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["grid"] != list(bad) and out["grid"] == [1, 1, 2, 1]
    store = Store(db)
    runs = {r["id"]: r for r in store.list()}
    first = [c for c in out["candidates"] if c["grid"] == list(bad)][0]
    assert first["gflops"] == [None] and runs[first["runs"][0]]["status"] == "failed"
    assert all(runs[i]["params"]["tune"] == out["session"] for i in out["runs"])
    assert any(
        f"{qcd_level.dims_text(bad)} (1-D)" in line and "excluded" in line for line in out["lines"]
    )
    assert "--grid 1x1x2x1" in out["command"]
    tune_record = runs[out["record"]]
    assert tune_record["level"] == "tune" and tune_record["status"] == "ok"

    from clustertune.levels.tune import section

    html = section.render([tune_record])
    assert "QCD decomposition, lattice 4x4x4x8 on 2 rank(s)" in html and "excluded" in html


def test_demo_step_on_this_host(store, monkeypatch, capsys, tmp_path) -> None:
    """The tuning level's demo step on one host: the QCD session and a quick Linpack
    session are stored and shown, the tuned HPL.dat is written beside the report and the
    report's section shows the session; the TCP tuning (it needs two hosts) is left out
    and says so."""
    from clustertune import catalog
    from clustertune.cluster import local_cluster
    from clustertune.levels.linpack import shim
    from clustertune.levels.tune import demo, section

    monkeypatch.setattr(demo, "DEMO_NP", 2)
    monkeypatch.setattr(demo, "DEMO_LATTICE", (4, 4, 4, 8))
    # Linpack: tiny N (from the budget) and Debian's OpenBLAS only, to keep the test short
    monkeypatch.setattr(shim, "scipy_openblas", lambda: None)
    monkeypatch.setattr(demo, "DEMO_BUDGET_MIN", 0.02)
    monkeypatch.setattr(demo, "DEMO_SKIP_BLAS", ("blas", "atlas", "blis-openmp", "blis-pthread"))
    monkeypatch.setattr(demo, "DEMO_DIR", tmp_path / "out")
    assert catalog.level("tune").part("demo") is demo.demo
    records = demo.demo(local_cluster(), store)
    tune = {r["params"]["what"]: r for r in records if r["level"] == "tune"}
    assert sorted(tune) == ["linpack", "qcd"] and {r["status"] for r in tune.values()} == {"ok"}
    assert {r["id"] for r in records} == {r["id"] for r in store.list()}
    dat = tmp_path / "out" / "tuned-HPL.dat"
    assert dat.read_text() == tune["linpack"]["detail"]["hpl_dat"]
    assert tune["linpack"]["detail"]["out"] == str(dat.resolve())
    assert "Linpack, session" in section.render([tune["linpack"]])
    err = capsys.readouterr().err
    assert "choose 1x1x" in err and "tune tcp: one host only" in err
    assert f"wrote {dat}" in err and "confirm " in err
