"""The main report: the summary table of its first screen (one or more rows per level,
the change since the previous run of the same kind on the same cluster, the same rows
from ``clustertune report --summary``); the studies among its runs listed before "All
runs", each linked to the page ``clustertune study report`` writes (same directory, same
file name)."""

from __future__ import annotations

import json
import re
import signal
from types import SimpleNamespace

import pytest

from clustertune import cli, demo, report, summary
from clustertune.cluster import local_cluster
from clustertune.errors import UserError
from clustertune.launch.process import Interrupted
from clustertune.levels.network import pingpong
from clustertune.levels.network.summary import judge_bandwidth
from clustertune.render import esc
from clustertune.results import Store
from clustertune.runner import new_record


def _record(study: dict | None, status: str = "ok") -> dict:
    record = new_record("x-report-test", "ct-test", local_cluster(), {}, ["localhost"], 1)
    record.update(status=status, verification="not-verified")
    if study is not None:
        record["meta"]["study"] = study
    return record


def test_report_links_the_studies_of_its_runs(store, tmp_path, monkeypatch):
    tags = [
        {"name": "npb-qcd", "variant": "quick", "point": "ep/np=1/openmpi/r1"},
        {"name": "npb-qcd", "variant": "quick", "point": "ep/np=2/openmpi/r1"},
        {"name": "npb-qcd", "variant": "quick", "point": "ep/np=2/openmpi/r1"},
        {"name": "beowulf-tuning", "variant": "full", "point": "gemm/type=d/openmpi/r1"},
        None,  # a run outside any study
    ]
    ids = [store.save(_record(t, "failed" if i == 2 else "ok")) for i, t in enumerate(tags)]
    html = report.build(store, ids)
    assert "<h2 id='studies'>Studies</h2>" in html
    assert html.index("id='studies'") < html.index("<h2>All runs</h2>")
    section = html[html.index("id='studies'") : html.index("<h2>All runs</h2>")]
    links = re.findall(r"<a href='([^']+)'>([^<]+)</a>", section)
    assert links == [
        ("clustertune-study-beowulf-tuning.html", "beowulf-tuning"),
        ("clustertune-study-npb-qcd-quick.html", "npb-qcd"),
    ]
    rows = re.findall(r"<tr><td><a[^>]*>([^<]+)</a></td>((?:<td>[^<]*</td>)+)</tr>", section)
    cells = {name: re.findall(r"<td>([^<]*)</td>", rest) for name, rest in rows}
    # variant, title, points, runs, runs not ok
    assert cells["npb-qcd"][0] == "quick" and cells["npb-qcd"][2:] == ["2", "3", "1"]
    assert cells["beowulf-tuning"][0] == "full" and cells["beowulf-tuning"][2:] == ["1", "1", "0"]
    assert cells["npb-qcd"][1]  # the built-in study's title

    # the links name the files `study report` writes by default, in the same directory
    monkeypatch.chdir(tmp_path)
    for href, name in links:
        quick = ["--quick"] if href.endswith("-quick.html") else []
        assert cli.main(["study", "report", name, *quick]) == 0
        assert (tmp_path / href).is_file()


def test_report_without_studies_has_no_studies_section(store):
    ids = [store.save(_record(None))]
    html = report.build(store, ids)
    assert "id='studies'" not in html and "<h2>All runs</h2>" in html


def test_study_names_are_escaped_in_links(store):
    ids = [store.save(_record({"name": "a b&<c>", "variant": "quick", "point": "p"}))]
    html = report.build(store, ids)
    assert "href='clustertune-study-a%20b%26%3Cc%3E-quick.html'" in html
    assert "a b&amp;&lt;c&gt;" in html and "<c>" not in html


def test_demo_help_and_unknown_arguments_build_nothing(monkeypatch, capsys):
    """``python -m clustertune.demo --help`` once started the whole demo; now it prints
    the usage and an unknown argument is refused (exit 2), both before any cluster."""
    monkeypatch.setattr(demo, "demo_cluster", lambda: pytest.fail("a cluster was built"))
    for argv, code in ((["--help"], 0), (["--hosts", "8"], 2)):
        with pytest.raises(SystemExit) as stop:
            demo.main(argv)
        assert stop.value.code == code
    out = capsys.readouterr()
    assert "virtual cluster" in out.out and "unrecognized arguments: --hosts 8" in out.err


@pytest.mark.parametrize(
    ("stop", "code"),
    [(None, 1), (UserError("no such host"), 2), (Interrupted(signal.SIGTERM), 128 + 15)],
)
def test_demo_reports_what_was_stored_also_when_a_level_stops(
    tmp_path, monkeypatch, capsys, stop, code
):
    """A level that fails or is interrupted still gets the report of the levels before it
    and of its own runs stored until then (not of runs stored before the demo), and the
    exit status stays the failure's."""
    monkeypatch.setattr(demo, "stop_on_signals", lambda: None)
    monkeypatch.setattr(demo, "demo_cluster", lambda: (local_cluster(), False))
    monkeypatch.setattr(demo, "REPORT_PATH", tmp_path / "out" / "report.html")
    earlier = Store()  # the database demo.main opens (CLUSTERTUNE_DB, the test's own)
    earlier.save(_record(None))  # run 1: not the demo's
    earlier.close()

    def good(cluster, store) -> list[dict]:
        record = _record(None)
        store.save(record)
        return [record]

    def stops(cluster, store) -> list[dict]:
        record = _record(None, "failed")
        store.save(record)
        if stop is not None:
            raise stop
        return [record]

    def after(cluster, store) -> list[dict]:
        assert stop is None, "a level after the one that stopped ran"
        return []

    steps = [
        SimpleNamespace(name=f"l{i}", part={"demo": step}.get)
        for i, step in enumerate((good, stops, after))
    ]
    monkeypatch.setattr(demo, "catalog", SimpleNamespace(all_levels=lambda: steps))
    assert demo.main() == code
    out, err = capsys.readouterr()
    assert out.strip() == str((tmp_path / "out" / "report.html").resolve())
    assert "2 run(s) stored" in err and "runs not ok: [3]" in err
    html = (tmp_path / "out" / "report.html").read_text()
    assert ": 2 run(s). Each row" in html  # runs 2 and 3


def _finished(record: dict, cluster: str, status: str) -> dict:
    record["meta"]["cluster"]["name"] = cluster
    record.update(status=status, verification="passed" if status == "ok" else "failed")
    return record


def _gemm(store: Store, gflops: float, cluster: str = "here") -> int:
    """A ct-gemm --local run on 4 ranks: the DGEMM peak an LU on 2 x 2 is read against."""
    record = new_record("linpack", "ct-gemm", local_cluster(), {}, ["localhost"], 4)
    record["samples"] = [
        {"dtype": "d", "mode": "local", "n": 1000, "p": 1, "q": 4, "gflops": gflops, "passed": True}
    ]
    return store.save(_finished(record, cluster, "ok"))


def _lu(
    store: Store, gflops: float, cluster: str = "here", passed: bool = True, n: int = 2016
) -> int:
    record = new_record("linpack", "ct-linpack", local_cluster(), {}, ["localhost"], 4)
    record["meta"]["cpus"] = {"online": 4, "usable": 4}  # a CPU per rank: the local DGEMM
    record["samples"] = [
        {
            "variant": "WR11C2R4",
            "n": n,
            "nb": 96,
            "p": 2,
            "q": 2,
            "time_s": 1.0,
            "gflops": gflops,
            "residual": 1e-3 if passed else 1e9,
            "passed": passed,
            "phases": {},
        }
    ]
    return store.save(_finished(record, cluster, "ok" if passed else "failed"))


def _first_screen(html: str) -> str:
    """The summary table: what the report shows before its first section."""
    start = html.index("<table id='summary'>")
    return html[start : html.index("</table>", start)]


def test_first_screen_shows_the_change_since_the_previous_linpack_run(store):
    _gemm(store, 40.0)
    first = _lu(store, 10.0)
    second = _lu(store, 8.8)  # 12 % slower on the same cluster
    elsewhere = _lu(store, 5.0, cluster="there")  # another cluster: nothing to compare
    screen = _first_screen(report.build(store))
    assert f"Linpack -12 % since run {first}" in screen
    rows = {r.run: r for r in report.summary_rows(store, store.list()) if r.level == "linpack"}
    assert set(rows) == {second, elsewhere}
    assert rows[second].figure == "8.80 Gflop/s" and rows[second].ratio == pytest.approx(0.22)
    assert rows[second].reference == "best DGEMM 40.00 Gflop/s"
    assert rows[elsewhere].change == "" and rows[elsewhere].reference.startswith("no DGEMM")
    # a report of the second run alone still finds the first in the store
    assert f"since run {first}" in _first_screen(report.build(store, [second]))
    same = _lu(store, 8.78)  # 0.2 % slower: no change, and said so without a sign
    (row,) = [r for r in report.summary_rows(store, [store.get(same)]) if r.level == "linpack"]
    assert row.change == f"Linpack +0 % since run {second}", row.change


def test_a_linpack_run_of_another_problem_is_not_a_change_of_the_cluster(store):
    """Issue 24.3: the change column compares earlier runs of the same kind; an LU of
    another N is another measure (its Gflop/s differ by the problem, not the cluster)."""
    _gemm(store, 40.0)
    big = _lu(store, 10.0, n=16000)
    small = _lu(store, 2.0, n=2016)
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "linpack"]
    assert (row.run, row.change) == (small, "")
    assert "since run" not in _first_screen(report.build(store))
    again = _lu(store, 9.0, n=16000)  # the same problem again: compared with its own kind
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "linpack"]
    assert (row.run, row.change) == (again, f"Linpack -10 % since run {big}")


def _tuned_qcd(store: Store, gflops: float, hb_rate: float | None) -> int:
    """A tune qcd session's record; hb_rate None: the shape stored before 91d10f7, whose
    gflops is 5700 x every link update."""
    detail = {"grid": [1, 1, 1, 2], "lattice": [4, 4, 4, 4], "np": 2, "gflops": gflops}
    detail["candidates"] = [{}, {}]  # two grids tried
    if hb_rate is not None:
        detail["hb_link_updates_per_s"] = hb_rate
    params = {"what": "qcd", "np": 2, "lattice": [4, 4, 4, 4]}
    record = new_record("tune", "ct-qcd", local_cluster(), params, ["localhost"], 2)
    record["detail"] = detail
    return store.save(_finished(record, "here", "ok"))


def test_a_tuned_qcd_of_the_old_qcdflops_is_no_change(store):
    """Review F8: QCDFlops was 5700 x all link updates before 91d10f7 (heat bath and 4 OR
    passes: 5x), now 5700 x heat-bath updates; an old session beside a new one of the same
    speed gave "tuned QCD -80 % since run N". The old one is shown as such, uncompared."""
    old = _tuned_qcd(store, 2.85, None)
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "tune"]
    assert row.value is None and "old definition" in row.figure and "2.85" not in row.figure
    new = _tuned_qcd(store, 0.57, 1e5)
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "tune"]
    assert (row.run, row.figure, row.change) == (new, "grid 1x1x1x2: 0.57 QCDFlops G", "")
    assert "since run" not in _first_screen(report.build(store)) and old < new
    again = _tuned_qcd(store, 0.513, 0.9e5)  # the same definition: compared
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "tune"]
    assert (row.run, row.change) == (again, f"tuned QCD -10 % since run {new}")


def test_a_failed_run_is_no_figure_and_no_change(store):
    _gemm(store, 40.0)
    _lu(store, 10.0)
    failed = _lu(store, 0.0, passed=False)
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "linpack"]
    assert (row.run, row.figure, row.state) == (failed, "no verified result", summary.BAD)
    assert row.change == "" and row.value is None
    assert "no verified result" in _first_screen(report.build(store))


def test_every_level_has_a_row_and_one_not_run_says_so(store):
    _lu(store, 10.0)
    rows = report.summary_rows(store, store.list())
    shown = {r.level for r in rows}
    assert {"hosts", "probe", "network", "linpack", "npb", "qcd", "io", "grid", "tune"} <= shown
    not_run = {r.level for r in rows if r.figure == "not run"}
    assert "linpack" not in not_run and {"npb", "qcd", "io", "network"} <= not_run
    html = _first_screen(report.build(store))
    assert html.count("<tr class=") == len(rows)
    assert "href='#linpack'" in html and "id='linpack'" in report.build(store)
    assert "href='#npb'" not in html  # no section to link to


def _matrix(store: Store, flagged: list[dict]) -> int:
    hosts = ["h0", "h1", "h2"]
    record = new_record(
        "network", "ct-tcp-pingpong", local_cluster(), {"command": "matrix", "layer": "tcp"}, hosts
    )
    record["figures"] = {
        "hosts": hosts,
        "flagged": flagged,
        "bandwidth_mbps": [[None, 940.0, 480.0], [940.0, None, 470.0], [480.0, 470.0, None]],
    }
    return store.save(_finished(record, "lab", "ok"))


def test_network_row_names_the_culprit_or_says_every_link_is_in_line(store):
    healthy = _matrix(store, [])
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
    assert (row.run, row.figure, row.verdict) == (healthy, "3 hosts, every link in line", "healthy")
    assert row.state == summary.GOOD and row.reference == "median link 480 Mbit/s"
    reason = "h2: bandwidth 475 Mbit/s on all 2 of its links, 0.51x the others"
    sick = _matrix(store, [{"host": "h2", "figure": "bandwidth", "reason": reason}])
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
    assert (row.run, row.figure, row.verdict, row.state) == (
        sick,
        reason,
        "culprit: h2",
        summary.BAD,
    )


def test_report_summary_prints_the_first_screen_rows(store, tmp_path, monkeypatch, capsys):
    _gemm(store, 40.0)
    first = _lu(store, 10.0)
    _lu(store, 8.8)
    rows = report.summary_rows(store, store.list())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "--summary", "--db", str(store.path)]) == 0
    text = capsys.readouterr().out
    assert text.strip() == summary.text_table(rows)
    lines = text.splitlines()
    assert len(lines) == 1 + len(rows) and lines[0].split()[:3] == ["level", "measure", "run"]
    linpack = next(line for line in lines if line.startswith("linpack"))
    assert "8.80 Gflop/s" in linpack and f"Linpack -12 % since run {first}" in linpack
    assert not list(tmp_path.glob("*.html"))  # --summary writes no report

    assert cli.main(["report", "--summary", "--json", "--db", str(store.path)]) == 0
    got = json.loads(capsys.readouterr().out)["summary"]
    assert got == summary.as_json(rows)
    assert [(r["level"], r["figure"], r["change"]) for r in got] == [
        (r.level, r.figure, r.change) for r in rows
    ]
    # the HTML's first screen has the same rows
    screen = _first_screen(report.build(store))
    assert all(esc(r.figure) in screen for r in rows)


@pytest.mark.parametrize(
    ("mbps", "verdict", "state"),
    [
        (925.0, "in line", summary.GOOD),
        (700.0, "below 90% of payload", summary.WARN),
        (955.0, "above payload ceiling", summary.WARN),
        (1010.0, "above payload ceiling", summary.WARN),
    ],
)
def test_link_bandwidth_is_judged_against_what_its_frames_carry(mbps, verdict, state):
    """1 Gbit/s carries at most 941 Mbit/s of TCP payload: a ping-pong above it measured
    a shaper's burst, one far below it a link losing more than headers."""
    row = summary.Row("TCP ping-pong", "")
    judge_bandwidth(row, mbps, 10**9)
    assert (row.verdict, row.state) == (verdict, state)
    assert row.ratio == pytest.approx(mbps / 1000) and row.reference == "1gbit (payload 941)"


def _pingpong(
    store: Store, mbps: float, dips: int = 0, link_bps: int | None = 10**9, **meta
) -> int:
    hosts = ["h0", "h1"]
    params = {"command": "pingpong", "layer": "tcp", "mode": "pingpong", "between": hosts}
    params |= {"mpi": None, "sockbuf": None, "nagle": False}
    record = new_record("network", "ct-tcp-pingpong", local_cluster(), params, hosts)
    record["meta"]["cluster"]["link_bps"] = {h: link_bps for h in hosts}
    record["meta"] |= meta
    record["figures"] = {
        "bandwidth_mbps": mbps,
        "latency_us": 30.0,
        "dips": [{"size": 65536.0, "ratio": 0.5}] * dips,
    }
    return store.save(_finished(record, "lab", "ok"))


def test_ping_pong_row_reads_the_link_its_curve_and_the_change(store):
    first = _pingpong(store, 925.0)
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
    assert (row.figure, row.verdict, row.state) == ("925 Mbit/s, 30.0 µs", "in line", summary.GOOD)
    _pingpong(store, 740.0, dips=2)  # slower, and the curve dips: seeds/002's faulty NIC
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
    assert row.verdict == "below 90% of payload, 2 dip(s) in the curve"
    assert row.state == summary.WARN and row.change == f"TCP bandwidth -20 % since run {first}"
    _pingpong(store, 9000.0, link_bps=None)  # unshaped: nothing to judge against
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
    assert (row.reference, row.verdict, row.state) == (
        "unshaped: no nominal rate",
        "",
        summary.NONE,
    )


def test_a_record_the_summary_cannot_read_is_a_row_not_a_lost_report(store, monkeypatch):
    """A store spans versions: a level's summary failing on an older record's shape says so
    in its row, and the report is still written."""

    def old_shape(records):
        return [summary.Row("x", records[0]["figures"]["gone"])]

    broken = SimpleNamespace(
        name="x-report-test",
        title="Broken",
        section="x:render",
        part={"section": lambda records: "<p>x</p>", "summary": old_shape}.get,
    )
    monkeypatch.setattr(report.catalog, "all_levels", lambda: [broken])
    run = store.save(_record(None))
    (row,) = report.summary_rows(store, store.list())
    assert (row.run, row.verdict, row.state) == (run, "summary failed", summary.BAD)
    assert "KeyError('gone')" in row.figure
    assert "summary failed" in _first_screen(report.build(store))


def test_hosts_and_probe_rows_say_what_was_read_and_what_failed(store):
    inventory = new_record("hosts", "hostinfo", local_cluster(), {}, ["h0", "h1"])
    inventory["samples"] = [
        {"name": "h0", "cpu": {"model": "EPYC", "cores": 2}, "memory_bytes": 2**31}
    ]
    inventory["detail"] = {"unreachable": {"h1": "ssh: no route to host"}}
    store.save(_finished(inventory, "lab", "failed"))
    for mpi, status in (("openmpi", "ok"), ("mpich", "failed")):
        launch = new_record("probe", "ct-probe", local_cluster(), {}, ["h0"], 2, mpi)
        launch["meta"]["mpi"] = {"flavour": mpi}
        launch["samples"] = [{"rank": i, "host": "h0", "library": mpi} for i in range(2)]
        store.save(_finished(launch, "lab", status))
    rows = {r.level: r for r in report.summary_rows(store, store.list())}
    assert rows["hosts"].figure == "1 x EPYC, 2 cores, 2.0 GiB"
    inventory["samples"][0]["memory_bytes"] = None  # not read: no figure made up
    store.save(inventory)
    rows = {r.level: r for r in report.summary_rows(store, store.list())}
    assert rows["hosts"].figure == "1 x EPYC, 2 cores, memory not read"
    assert (rows["hosts"].verdict, rows["hosts"].state) == ("1 host(s) not read", summary.BAD)
    assert rows["probe"].measure == "launch with mpich, openmpi (lab)"
    assert (rows["probe"].verdict, rows["probe"].state) == ("FAILED with mpich", summary.BAD)


def test_long_tables_fold_with_the_best_row_in_view(store):
    """A tuner's search of 20 LU results: the best result in view, all 20 behind a closed
    <details>; the list of all runs folded too; no script anywhere."""
    _gemm(store, 40.0)
    record = new_record("linpack", "ct-linpack", local_cluster(), {}, ["localhost"], 4)
    record["samples"] = [
        {
            "variant": "WR11C2R4",
            "n": 2016,
            "nb": 32 + i,
            "p": 2,
            "q": 2,
            "time_s": 1.0,
            "gflops": [5.0, 17.25][i == 7] + i / 100,
            "residual": 1e-3,
            "passed": True,
            "phases": {},
        }
        for i in range(20)
    ]
    store.save(_finished(record, "here", "ok"))
    html = report.build(store)
    assert "<script" not in html and "<details open" not in html
    section = html[html.index("<h3>LU (ct-linpack)</h3>") : html.index("<h3>GEMM</h3>")]
    in_view, folded = section.split("<details><summary>All 20 LU results", 1)
    assert "<td>17.320</td>" in in_view and in_view.count("<tr>") == 2  # header + best
    assert folded.count("<td>WR11C2R4</td>") == 20
    runs = html[html.index("<h2>All runs</h2>") :]
    assert "2 run(s): 2 ok." in runs and "<details><summary>All 2 runs</summary>" in runs


def _virtual(wire: str | None) -> dict:
    """meta "cluster" of a virtual cluster's record (wire None: made before it was recorded)."""
    cluster = {"name": "lab", "source": "vcluster:lab", "link_bps": {"h0": 10**9, "h1": 10**9}}
    return cluster | ({"wire": wire} if wire else {})


def test_ping_pong_row_judges_curve_dips_only_on_a_paced_wire(store):
    """Mid-size shape on a tbf wire is the bucket's, not the link's (docs/network.md):
    its dips are not judged, nor on a virtual cluster whose wire was not recorded."""
    expected = {
        "paced": ("in line, 2 dip(s) in the curve", summary.WARN),
        "tbf": ("in line, dips not judged (tbf wire)", summary.GOOD),
        None: ("in line, dips not judged (wire not recorded)", summary.GOOD),
    }
    for wire, verdict in expected.items():
        run = _pingpong(store, 925.0, dips=2, cluster=_virtual(wire))
        (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
        assert (row.run, (row.verdict, row.state)) == (run, verdict), wire


def test_a_late_wire_is_named_in_the_text_the_runs_table_and_the_first_screen(store):
    """Issue 19.2: a run whose wire was late is labelled wherever its figures are shown,
    and the first screen warns instead of judging its bandwidth."""
    label = "wire late (p99 900 µs, load 11.0)"
    on_time = _pingpong(store, 925.0, cluster=_virtual("paced"))
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
    assert (row.run, row.verdict, row.state) == (on_time, "in line", summary.GOOD)
    late = _pingpong(store, 925.0, cluster=_virtual("paced"), labels=[label])
    (row,) = [r for r in report.summary_rows(store, store.list()) if r.level == "network"]
    assert (row.run, row.verdict, row.state) == (late, label, summary.WARN)
    html = report.build(store)
    assert esc(label) in _first_screen(html)
    runs = html[html.index("<h2>All runs</h2>") :]
    assert f"<td>{esc(label)}</td>" in runs
    record = next(r for r in store.list() if r["id"] == late)
    assert f"labels: {label}" in pingpong.run_text(record)
    on_time_record = next(r for r in store.list() if r["id"] == on_time)
    assert "labels" not in pingpong.run_text(on_time_record)


def test_a_late_wire_does_not_turn_a_figure_that_never_crossed_it_orange(store):
    """A launch check and a rank's own DGEMM rate do not cross the links: on the demo, four
    busy-polling MPICH ranks on 2 CPUs made the pacers late (p99 723 µs) during the probe,
    and its first-screen row said "wire late" in place of whether the ranks started. The
    label stays in the run table; the row keeps its own verdict."""
    label = "wire late (p99 723 µs, load 0.9)"
    launch = new_record("probe", "ct-probe", local_cluster(), {}, ["h0"], 2, "mpich")
    launch["meta"] |= {"mpi": {"flavour": "mpich"}, "labels": [label]}
    launch["samples"] = [{"rank": i, "host": f"h{i}", "library": "mpich"} for i in range(2)]
    store.save(_finished(launch, "lab", "ok"))
    gemm = store.get(_gemm(store, 100.0))
    gemm["meta"]["labels"] = [label]
    store.save(gemm)
    rows = {r.level: r for r in report.summary_rows(store, store.list())}
    assert (rows["probe"].verdict, rows["probe"].state) == ("one MPI_COMM_WORLD each", summary.GOOD)
    assert (rows["linpack"].verdict, rows["linpack"].state) == ("verified", summary.GOOD)
    runs = report.build(store)
    assert runs[runs.index("<h2>All runs</h2>") :].count(f"<td>{esc(label)}</td>") == 2
