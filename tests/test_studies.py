"""Studies: the built-in study files load; a bad study file is one line naming
file:line:field (exit 2); a quick study runs on virtual clusters, stores every point as a
tagged run, and a run cut off mid-way then rerun finishes without redoing finished points;
the study page marks every finding and contains no external resource."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from clustertune import cli
from clustertune.studies import execute, findings, page, spec

BUILTIN = ("beowulf-tuning", "npb-qcd", "grid-linpack", "remote-netcdf-io")


@pytest.mark.parametrize("quick", [False, True])
def test_builtin_studies_load(quick):
    found = spec.builtin()
    for name in BUILTIN:
        study = spec.load(name, quick=quick)
        assert study.name == name and study.points() and study.findings
        keys = [p.key for p in study.points()]
        assert len(keys) == len(set(keys))
    assert set(BUILTIN) <= set(found)


def test_quick_variant_is_smaller():
    full, quick = spec.load("npb-qcd"), spec.load("npb-qcd", quick=True)
    assert len(quick.points()) < len(full.points())
    assert {p.values["class"] for p in quick.points() if p.step.kind == "npb"} == {"S"}
    assert not {"bt", "lu-b", "qcd-table3"} & {s.name for s in quick.steps}
    # a [[here]] row on a full-only step is read in both variants, shown in the full one
    assert {h["a"]["step"] for h in full.here} == {"ep", "lu", "qcd", "qcd-table3"}
    assert {h["a"]["step"] for h in quick.here} == {"ep", "lu", "qcd"}
    lu_b = [p.values for p in full.points() if p.step.name == "lu-b"]
    assert {v["class"] for v in lu_b} == {"B"} and [v["np"] for v in lu_b] == [1, 2, 4, 8]


def test_study_list(capsys):
    assert cli.main(["study", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in BUILTIN)


REMOTE = (
    '[study]\nname = "x"\n[[cluster]]\nname = "c"\nsites = 2\n[[step]]\nname = "s"\n'
    'kind = "netcdf_remote"\n'
)

NPB = '[study]\nname = "x"\n[[cluster]]\nname = "c"\n[[step]]\nname = "s"\nkind = "npb"\n'
BAD = [
    ('[study]\nname = "x"\n\n[[cluster]]\nname = "c"\nhostz = 2\n', 6, "cluster[0].hostz"),
    ('[study]\nname = "x"\n[[cluster]]\nname = "c"\n[[step]]\nname = "s"\nkind = "nope"\n', 7,
     "step[0].kind"),
    ('[study]\nname = "x"\n[[cluster]]\nname = "c"\nlink = "fast"\n', 5, "cluster[0].link"),
    ('[study]\nname = "x"\n[[cluster]]\nname = "c"\n[[step]]\nname = "s"\nkind = "npb"\n'
     'sweep = { np = 4 }\n', 8, "step[0].sweep"),
    ('[study]\nname = "x"\n[[cluster]]\nname = "c"\n[[step]]\nname = "s"\nkind = "npb"\n'
     'params = { lattice = "8x8x8x8" }\n', 8, "step[0].params"),
    ('[study]\nname = "x"\n[[cluster]]\nname = "c"\n[[step]]\nname = "s"\nkind = "npb"\n'
     '[[finding]]\nid = "f"\ntext = "t"\ncheck = "ratio"\n'
     'a = { step = "s", figure = "m" }\nb = { step = "t", figure = "m" }\nexpect = [0, 1]\n',
     13, "finding[0].b"),
    ('[study]\nname = "x"\n[[cluster]\n', 3, "syntax"),
    ('[study]\nname = "x"\n[[cluster]]\nname = "c"\nscheduler = "pbs"\n', 5,
     "cluster[0].scheduler: 'pbs': expected one of"),
    ('[study]\nname = "x"\n[[cluster]]\nname = "c"\nhosts = 3\nsites = 2\nscheduler = "slurm"\n',
     7, "cluster[0].scheduler: a virtual grid: hosts a multiple of sites"),
    # the remote I/O step's values, checked when the file is read (the error names the key)
    (REMOTE + 'params = { session = "always" }\n', 9, "step[0].params: session: expected one of job, file"),
    (REMOTE + 'sweep = { sizes = [16, 4096] }\n', 9, "step[0].sweep: sizes: '4096': expected sizes N (1..2048)"),
    (REMOTE + 'cases = [{ batch = "yes" }]\n', 9, "step[0].cases: batch: expected true or false"),
    (REMOTE + 'params = { server_round = "lots" }\n', 9, "step[0].params: server_round: 'lots'"),
    (REMOTE + 'params = { remote = "site1" }\n', 9, "step[0].params: 'remote' is not a parameter"),
    # a wrong type is named, not a TypeError nor a table's "unknown field"
    ('cluster = 5\n[study]\nname = "x"\n', 1, "cluster: expected [[cluster]] tables, got 5"),
    ('step = ["x"]\n[study]\nname = "x"\n', 1, "step: expected [[step]] tables"),
    ('here = "a"\n[study]\nname = "x"\n', 1, "here: expected [[here]] tables"),
    (NPB + "params = 5\n", 8, "step[0].params: expected a table, got 5"),
    # the npb step's values too, not when the point runs on a cluster built for it
    (NPB + 'params = { class = "Q" }\n', 8,
     "step[0].params: class: expected one of S, W, A, B, C, got 'Q'"),
    (NPB + 'sweep = { benchmark = ["ep", "ft"] }\n', 8,
     "step[0].sweep: benchmark: npb ft: FT is not built in this version of clustertune"),
    (NPB + 'cases = [{ np = 0 }]\n', 8, "step[0].cases: np: must be at least 1, got 0"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "field"), BAD)
def test_bad_study_file_names_line_and_field(tmp_path, capsys, text, line, field):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert cli.main(["study", "run", str(path), "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{path}:{line}: {field}" in err  # field, or field: problem


def test_unknown_study_is_a_user_error(capsys):
    assert cli.main(["study", "report", "no-such-study"]) == 2
    assert "not a built-in study" in capsys.readouterr().err


def _record(point: str, status: str, attempt: str = "a1") -> dict:
    return {"status": status, "meta": {"study": {"point": point, "attempt": attempt}}}


def test_quick_variants_keep_the_papers_link_rates():
    """Smaller sweeps, not faster links: a quick variant's findings are judged on the
    paper's wires (seeds/002's Fast Ethernet findings were read on unshaped links)."""
    for name in spec.builtin():
        full, quick = spec.load(name), spec.load(name, quick=True)
        for cname, c in quick.clusters.items():
            paper = full.clusters[cname]
            assert c.link is not None and (c.link, c.wan_link) == (paper.link, paper.wan_link), (
                f"{name} cluster {cname}: quick {c.link}/{c.wan_link}, "
                f"paper {paper.link}/{paper.wan_link}"
            )


# a finding on a mid-size figure: MPI's saturation point above TCP's
SATURATION = {
    "id": "s",
    "text": "t",
    "check": "greater",
    "a": {"step": "pp", "where": {"layer": "mpi"}, "figure": "saturation_point_bytes"},
    "b": {"step": "pp", "where": {"layer": "tcp"}, "figure": "saturation_point_bytes"},
}


def _on_wire(rid: int, layer: str, figures: dict, wire: str | None) -> dict:
    record = _fake("pp", {"layer": layer}, figures, rid)
    record["meta"]["cluster"] = {"name": f"st{rid}", "wire": wire, "link_bps": {"host0": 10**8}}
    record["meta"]["study"]["cluster"] = "lan"
    return record


def test_a_mid_size_finding_is_judged_only_on_a_paced_wire_or_a_real_link():
    figures = (
        {"saturation_point_bytes": 300, "latency_us": 90.0},
        {"saturation_point_bytes": 150, "latency_us": 50.0},
    )
    for wire in ("paced", None):
        records = [_on_wire(1, "mpi", figures[0], wire), _on_wire(2, "tcp", figures[1], wire)]
        assert findings.evaluate(SATURATION, records)["status"] == "reproduced", wire
    mixed = [_on_wire(1, "mpi", figures[0], "tbf"), _on_wire(2, "tcp", figures[1], "paced")]
    got = findings.evaluate(SATURATION, mixed)
    assert got["status"] == "not judged" and got["measured"] is None
    assert "tbf wire (runs 1)" in got["evidence"] and got["runs"] == [1, 2]
    latency = {
        **SATURATION,
        "a": {**SATURATION["a"], "figure": "latency_us"},
        "b": {**SATURATION["b"], "figure": "latency_us"},
    }
    assert findings.evaluate(latency, mixed)["status"] == "reproduced"  # not a mid-size figure
    shown = page._wires(mixed)
    assert (
        "<li>lan: 100mbit links, paced wire (virtual); 100mbit links, tbf wire (virtual)</li>"
        in shown
    )
    assert page.STATUS_CLASS["not judged"] == "incomplete"


def test_a_mid_size_finding_on_an_old_virtual_record_without_its_wire_is_not_judged():
    """Records made before meta "wire" were on tbf virtual links (the old default): their
    mid-size figures are not judged; a real cluster's record (no wire key) still is."""
    records = [
        _on_wire(1, "mpi", {"saturation_point_bytes": 300}, "paced"),
        _on_wire(2, "tcp", {"saturation_point_bytes": 150}, "paced"),
    ]
    for record, source in zip(records, ("vcluster:st1", "localhost"), strict=True):
        del record["meta"]["cluster"]["wire"]
        record["meta"]["cluster"]["source"] = source
    got = findings.evaluate(SATURATION, records)
    assert got["status"] == "not judged" and got["measured"] is None
    assert "wire not recorded (runs 1)" in got["evidence"]
    records[0]["meta"]["cluster"]["source"] = "/etc/lab.toml"  # a real cluster's file
    assert findings.evaluate(SATURATION, records)["status"] == "reproduced"


def test_finished_rules():
    assert not execute.finished([], 1)
    assert execute.finished([_record("p", "ok")], 1)
    assert execute.finished([_record("p", "failed")], 1)
    assert not execute.finished([_record("p", "failed")], 1, redo_failed=True)
    assert not execute.finished([_record("p", "interrupted")], 1)
    # a two-record point cut after its first record is not finished; a later full attempt is
    assert not execute.finished([_record("p", "ok")], 2)
    assert execute.finished(
        [_record("p", "ok"), _record("p", "ok", "a2"), _record("p", "ok", "a2")], 2
    )


def _fake(step: str, values: dict, figures: dict, rid: int, samples=()) -> dict:
    return {
        "id": rid,
        "status": "ok",
        "figures": figures,
        "samples": list(samples),
        "meta": {"study": {"step": step, "values": values, "mpi": "openmpi"}},
    }


def test_findings_checks_on_records():
    records = [
        _fake("pp", {"layer": "tcp"}, {"latency_us": 50.0, "dips": []}, 1),
        _fake("pp", {"layer": "mpi"}, {"latency_us": 90.0, "dips": [[1, 2]]}, 2),
        _fake("ep", {"np": 1}, {"m": 10.0}, 3),
        _fake("ep", {"np": 2}, {"m": 4.0}, 4),
    ]
    ratio = {
        "id": "r",
        "text": "t",
        "check": "ratio",
        "expect": [1.0, float("inf")],
        "a": {"step": "pp", "where": {"layer": "mpi"}, "figure": "latency_us"},
        "b": {"step": "pp", "where": {"layer": "tcp"}, "figure": "latency_us"},
    }
    got = findings.evaluate(ratio, records)
    assert got["status"] == "reproduced" and got["measured"] == pytest.approx(1.8)
    assert "1.80x" in got["evidence"] and got["runs"] == [2, 1]
    assert findings.evaluate(ratio | {"expect": [0, 1]}, records)["status"] == "not reproduced"
    dips = ratio | {
        "check": "greater",
        "a": {**ratio["a"], "figure": "dips"},
        "b": {**ratio["b"], "figure": "dips"},
    }
    assert findings.evaluate(dips, records)["status"] == "reproduced"
    flat = {
        "id": "f",
        "text": "t",
        "check": "flat",
        "expect": 1.5,
        "x": "np",
        "a": {"step": "ep", "figure": "m"},
    }
    got = findings.evaluate(flat, records)
    assert got["status"] == "not reproduced" and got["measured"] == pytest.approx(2.5)
    trend = flat | {"check": "trend", "expect": "lower"}
    assert findings.evaluate(trend, records)["status"] == "reproduced"
    missing = ratio | {"a": {**ratio["a"], "where": {"layer": "pvm"}}}
    assert findings.evaluate(missing, records)["status"] == "no data"


@pytest.mark.root
def test_quick_study_cut_off_and_rerun_skips_finished_points(store, tmp_path):
    study = spec.load("npb-qcd", quick=True)
    n = len(study.points())
    lines: list[str] = []
    first = execute.run(study, store, max_points=3, log=lines.append)
    assert first.stopped_after == 3 and len(first.ran) == 3 and first.ok
    done = execute.stored(store, "npb-qcd", quick=True)
    assert len(done) == 3
    ids_before = {r["id"] for rs in done.values() for r in rs}
    assert any("stopped" in line for line in lines)
    assert sum("running on" in line for line in lines) == 3

    second = execute.run(study, store, log=lines.append)
    assert len(second.skipped) == 3 and len(second.ran) == n - 3 and second.ok
    records = store.list()
    assert len(records) == n  # nothing ran twice
    assert ids_before <= {r["id"] for r in records}
    for r in records:
        tag = r["meta"]["study"]
        assert tag["name"] == "npb-qcd" and tag["variant"] == "quick" and r["status"] == "ok"
    assert len({r["meta"]["study"]["point"] for r in records}) == n

    third = execute.run(study, store, log=lines.append)
    assert len(third.skipped) == n and not third.ran and len(store.list()) == n

    html = page.build(study, records)
    # EP and LU vs np; QCD Gflops vs dims and its computation / communication split
    assert html.count("<svg") == 4
    from test_report_chromium import CHROMIUM, render  # the report test's probe

    if CHROMIUM:
        (tmp_path / "npb-qcd.html").write_text(html)
        shown = render(tmp_path / "npb-qcd.html", tmp_path)
        assert not shown["errors"] and not shown["resources"]
        assert shown["svgs"] == shown["drawn"] == 4
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    for finding in study.findings:
        assert finding["text"].replace("'", "&#x27;") in html
    out = tmp_path / "p.html"
    assert (
        cli.main(
            ["study", "report", "npb-qcd", "--quick", "--db", str(store.path), "--out", str(out)]
        )
        == 0
    )
    assert "table 4" in out.read_text()  # the paper's machines beside this cluster


VERDICTS = re.compile(
    r'<td class="(?:ok|failed|incomplete)">(reproduced|not reproduced|'
    r"no data|not judged)</td>"
)


def _quick_page(name: str, db, tmp_path) -> tuple[str, list[str]]:
    """`study report NAME --quick` from the database: the page and its findings' verdicts."""
    out = tmp_path / f"{name}.html"
    assert cli.main(["study", "report", name, "--quick", "--db", str(db), "--out", str(out)]) == 0
    html = out.read_text()
    return html, VERDICTS.findall(html)


@pytest.mark.root
def test_beowulf_quick_end_to_end(tmp_path, capsys):
    db = tmp_path / "b.db"
    assert cli.main(["study", "run", "beowulf-tuning", "--quick", "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert "faults {'host1': 'loss=0.5%'}" in err  # the faulty-NIC cluster was built
    assert re.search(r"\[\d/\d\] beowulf-tuning pingpong/layer=mpi/openmpi/r1: ok", err)
    html, verdicts = _quick_page("beowulf-tuning", db, tmp_path)
    assert len(verdicts) == len(spec.load("beowulf-tuning").findings)
    assert verdicts.count("no data") <= 2  # PVM is full-only; everything else measured
    assert "ERATO-1 via Catalyst 5505" in html and "this cluster (runs" in html


@pytest.mark.root
def test_grid_linpack_quick_end_to_end(tmp_path, capsys):
    """The quick variant on its virtual clusters (two sites, plain and as a grid of Slurm
    sites; two dual-CPU nodes): every point stored ok and tagged, the placements of table 6
    on the hosts named, HPL against N through the plain launcher and the grid's, and the
    page with a verdict per finding, a plot per step and the paper's table 6 beside this
    cluster."""
    db = tmp_path / "g.db"
    study = spec.load("grid-linpack", quick=True)
    assert cli.main(["study", "run", "grid-linpack", "--quick", "--db", str(db)]) == 0
    err = capsys.readouterr().err
    # the paper's link rates in quick too (smaller sweeps, not faster links), paced
    assert "2 hosts, link 1gbit, paced wire" in err
    assert "4 hosts, link 100mbit, paced wire, a grid of slurm" in err
    from clustertune.results import Store

    store = Store(db)
    records = sorted(store.list(), key=lambda r: r["id"])
    store.close()
    assert sorted(r["meta"]["study"]["point"] for r in records) == sorted(
        p.key for p in study.points()
    )
    assert all(r["status"] == "ok" and r["meta"]["study"]["variant"] == "quick" for r in records)
    placement = {
        r["meta"]["study"]["point"]: r["meta"]["hosts"]
        for r in records
        if r["meta"]["study"]["step"] == "placement"
    }
    assert sorted(map(tuple, placement.values())) == [("host0",), ("host0",), ("host0", "host1")]
    launchers = {r["meta"]["study"]["step"]: r["meta"]["cluster"]["launcher"] for r in records}
    assert launchers["n100"] == "vcluster" and launchers["n100-grid"] == "grid"  # figs. 8, 10
    buffers = [r for r in records if r["meta"]["study"]["step"] == "tcp-buffer"]
    assert {r["meta"]["env"]["OMPI_MCA_btl_tcp_sndbuf"] for r in buffers} == {"4096", "262144"}
    html, verdicts = _quick_page("grid-linpack", db, tmp_path)
    assert len(verdicts) == len(study.findings) and "no data" not in verdicts
    assert html.count("<svg") == len(study.steps)  # one plot per step
    assert "this cluster (runs" in html and "table 6" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)


def test_grid_step_is_not_run_on_a_plain_cluster():
    """--cluster: a step of a grid cluster (figs. 8, 10 through the grid launcher) is not
    runnable on a cluster that is not a grid, rather than run plainly under the grid's name."""
    from clustertune.cluster import local_cluster
    from clustertune.studies import catalog

    study = spec.load("grid-linpack", quick=True)
    clusters = execute.Clusters(study, local_cluster(), log=lambda line: None)
    linpack = catalog.kinds()["linpack"]
    why = clusters.unavailable(study.clusters["gridstack100"], linpack)
    assert why and "grid of slurm sites" in why and "is not a grid" in why
    assert clusters.unavailable(study.clusters["nodes"], linpack) is None


def test_cases_give_one_point_each_with_readable_keys():
    study = spec.load("grid-linpack", quick=True)
    keys = [p.key for p in study.points() if p.step.name == "placement"]
    assert keys == [
        "placement/np=1,pq=1x1,hosts=host0/openmpi/r1",
        "placement/np=2,pq=1x2,hosts=host0+host1/openmpi/r1",
        "placement/np=2,pq=1x2,hosts=host0/openmpi/r1",
    ]


def test_linpack_kind_refuses_bad_pq_and_sets_each_mpis_tcp_buffer():
    from clustertune.errors import UserError
    from clustertune.studies import catalog, kinds

    with pytest.raises(UserError, match="pq: expected PxQ"):
        catalog.kinds()["linpack"].run(None, None, {"pq": "2by4"}, "openmpi")
    with pytest.raises(UserError, match="tcp_buffer: no TCP socket buffer setting known for lam"):
        kinds.tcp_buffer_env("lam", "64K")
    assert kinds.tcp_buffer_env("openmpi", "64K") == {
        "OMPI_MCA_btl_tcp_sndbuf": "65536",
        "OMPI_MCA_btl_tcp_rcvbuf": "65536",
    }
    # UCX's tcp transport (MPICH ch4:ucx) knows both variables: no "unused env variable"
    assert kinds.tcp_buffer_env("mpich", "4K") == {
        "UCX_TCP_SNDBUF": "4096",
        "UCX_TCP_RCVBUF": "4096",
    }


def test_sample_selectors_filter_and_nest():
    rec = _fake(
        "io",
        {"sizes": 16},
        {"w": {"16": 1.5}},
        1,
        samples=[
            {"mode": "collective", "t": {"min": 1.0}},
            {"mode": "independent", "t": {"min": 3.0}},
        ],
    )
    sel = {"step": "io", "figure": "samples.t.min", "samples": {"mode": "independent"}}
    assert findings.select([rec], sel) == (3.0, [1])
    assert findings.select([rec], {"step": "io", "figure": "w.*"}) == (1.5, [1])


def quick_study_process(name: str, db: Path):
    """``clustertune study run NAME --quick --db DB`` as a process of its own (to be
    signalled mid-way), its stderr a pipe to read the progress from."""
    argv = [sys.executable, "-m", "clustertune.cli", "study", "run", name, "--quick"]
    return subprocess.Popen([*argv, "--db", str(db)], stderr=subprocess.PIPE, text=True)


@pytest.mark.root
def test_study_killed_by_a_signal_then_rerun_finishes_without_redoing(tmp_path):
    import collections
    import signal

    from clustertune.results import Store

    db = tmp_path / "k.db"
    proc = quick_study_process("npb-qcd", db)
    oks = 0
    for line in proc.stderr:
        oks += ": ok (run" in line
        if oks == 2:
            proc.send_signal(signal.SIGTERM)
            break
    proc.stderr.read()
    assert proc.wait(timeout=120) in (128 + signal.SIGTERM, 0)
    store = Store(db)
    before = {r["id"]: r["meta"]["study"]["point"] for r in store.list() if r["status"] == "ok"}
    assert len(before) >= 2
    assert cli.main(["study", "run", "npb-qcd", "--quick", "--db", str(db)]) == 0
    records = store.list()
    ok_points = collections.Counter(
        r["meta"]["study"]["point"] for r in records if r["status"] == "ok"
    )
    n = len(spec.load("npb-qcd", quick=True).points())
    assert len(ok_points) == n and set(ok_points.values()) == {1}  # none ran twice
    assert all(r["status"] in ("ok", "interrupted") for r in records)
    store.close()


def test_remote_netcdf_kind_refuses_a_site_the_cluster_lacks(tmp_path):
    from clustertune.cluster import local_cluster
    from clustertune.errors import UserError
    from clustertune.studies import catalog

    remote = catalog.kinds()["netcdf_remote"]
    with pytest.raises(UserError, match=r"site: 'site7' is not a site of cluster 'localhost'"):
        remote.run(local_cluster(), None, {"site": "site7"}, "mpich", rundir=tmp_path)
    assert remote.sites == 2 and remote.rundir and not list(tmp_path.iterdir())


def test_study_directory_is_absolute_beside_a_relative_database(tmp_path, monkeypatch):
    from clustertune.results import Store

    monkeypatch.chdir(tmp_path)
    store = Store("r.db")  # a relative --db, as the demo's: the CA must still be found
    got = execute.rundir(store, spec.load("remote-netcdf-io", quick=True))
    assert got == tmp_path / "studies" / "remote-netcdf-io-quick" and got.is_absolute()
    store.close()


@pytest.mark.root
def test_remote_netcdf_quick_killed_mid_way_then_rerun_and_rendered(tmp_path):
    """The quick study in a subprocess SIGKILLed during its first running-service remote
    point (its cluster, server and client left behind); the rerun removes them, skips the
    finished points, runs the rest, and the page shows local and remote points."""
    import collections
    import signal

    from clustertune.results import Store

    db = tmp_path / "r.db"
    proc = quick_study_process("remote-netcdf-io", db)
    for line in proc.stderr:
        if "remote/sizes=16,np=2,session=job" in line and "running on" in line:
            proc.send_signal(signal.SIGKILL)  # mid-point: no record, nothing cleaned up
            break
    proc.stderr.read()
    assert proc.wait(timeout=120) == -signal.SIGKILL
    store = Store(db)
    before = {r["meta"]["study"]["point"]: r["id"] for r in store.list()}
    assert len(before) == 3 and all(r["status"] == "ok" for r in store.list())

    study = spec.load("remote-netcdf-io", quick=True)
    lines: list[str] = []
    out = execute.run(study, store, log=lines.append)
    assert out.ok and sorted(out.skipped) == sorted(before) and len(out.ran) == 3
    assert any("left by an earlier run" in line for line in lines)
    records = store.list()
    assert collections.Counter(r["meta"]["study"]["point"] for r in records) == {
        p.key: 1 for p in study.points()
    }  # every point once: none redone
    remote = [r for r in records if r["meta"]["study"]["step"] == "remote"]
    assert len(remote) == 4 and all(r["params"]["remote"] == "site1" for r in remote)
    assert {(r["params"]["session"], r["params"]["batch"]) for r in remote} == {
        ("file", False),
        ("job", True),
    }
    for r in remote:  # every size, op and mode verified, the files checked on the server
        assert {(s["op"], s["mode"]) for s in r["samples"]} == {
            (o, m) for o in ("write", "read") for m in ("collective", "independent")
        }
        assert all(s["verified"] for s in r["samples"]) and r["figures"]["files"]
    ca = execute.rundir(store, study) / "ca"
    assert {p.name for p in ca.iterdir()} >= {"ca.pem", "server.pem", "study.pem"}

    html = page.build(study, sorted(records, key=lambda r: r["id"]))
    assert html.count("<svg") == 4  # figs. 3 and 4, local and remote
    assert "remote/sizes=32,np=2,session=job,batch=True/mpich/r1" in html
    assert "Remote collective" in html and "link between the clusters" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    verdicts = VERDICTS.findall(html)
    assert len(verdicts) == len(study.findings) and verdicts.count("no data") == 1  # 256^3
    store.close()

    from test_report_chromium import CHROMIUM, render  # the report test's probe

    if CHROMIUM:
        path = tmp_path / "remote.html"
        path.write_text(html)
        shown = render(path, tmp_path)
        assert not shown["errors"] and not shown["resources"]
        assert shown["svgs"] == shown["drawn"] == 4 and "Measurements" in shown["h2"]
