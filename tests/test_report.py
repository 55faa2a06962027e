"""The main report: the studies among its runs listed before "All runs", each linked to
the page ``clustertune study report`` writes (same directory, same file name)."""

from __future__ import annotations

import re
import signal
from types import SimpleNamespace

import pytest

from clustertune import cli, demo, report
from clustertune.cluster import local_cluster
from clustertune.errors import UserError
from clustertune.launch.process import Interrupted
from clustertune.levels import Level
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
    assert links == [("clustertune-study-beowulf-tuning.html", "beowulf-tuning"),
                     ("clustertune-study-npb-qcd-quick.html", "npb-qcd")]  # fmt: skip
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


@pytest.mark.parametrize(
    ("stop", "code"),
    [(None, 1), (UserError("no such host"), 2), (Interrupted(signal.SIGTERM), 128 + 15)],
)
def test_demo_reports_what_was_stored_also_when_a_level_stops(tmp_path, monkeypatch, capsys,
                                                              stop, code):  # fmt: skip
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

    steps = [Level(f"l{i}", "", i, demo=step) for i, step in enumerate((good, stops, after))]
    monkeypatch.setattr(demo, "levels", SimpleNamespace(all_levels=lambda: steps))
    assert demo.main() == code
    out, err = capsys.readouterr()
    assert out.strip() == str((tmp_path / "out" / "report.html").resolve())
    assert "2 run(s) stored" in err and "runs not ok: [3]" in err
    html = (tmp_path / "out" / "report.html").read_text()
    assert ": 2 run(s).</p>" in html  # runs 2 and 3
