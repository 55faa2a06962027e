"""The result store: round trip, listing, comparison, export, and crash safety."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from clustertune.cluster import local_cluster
from clustertune.results import SCHEMA, Store, compare, flatten_for_csv, validate
from clustertune.runner import new_record


def make_record(level="probe", status="ok", verification="passed", **figures):
    record = new_record(level, "ct-test", local_cluster(), {"np": 2}, ["localhost"], 2, "openmpi")
    record.update(status=status, verification=verification, figures=figures)
    record["samples"] = [{"rank": 0}, {"rank": 1}]
    return record


def test_round_trip(store):
    record = make_record(latency_us=12.5)
    run_id = store.save(record)
    assert run_id == record["id"] == 1
    loaded = store.get(run_id)
    assert loaded == json.loads(json.dumps(record))
    assert loaded["schema"] == SCHEMA
    assert loaded["meta"]["np"] == 2
    assert loaded["meta"]["mpi"]["flavour"] == "openmpi"


def test_wal_mode(store):
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_list_by_level_and_limit(store):
    for level in ("probe", "network", "probe", "probe"):
        store.save(make_record(level))
    assert [r["id"] for r in store.list()] == [1, 2, 3, 4]
    assert [r["id"] for r in store.list(level="probe")] == [1, 3, 4]
    assert [r["id"] for r in store.list(level="probe", limit=2)] == [3, 4]
    assert store.levels() == ["network", "probe"]


def test_get_unknown_id_is_a_user_error(store):
    from clustertune.errors import UserError

    with pytest.raises(UserError, match="no run with id 7"):
        store.get(7)


def test_schema_is_enforced(store):
    with pytest.raises(ValueError, match="verification"):
        store.save(make_record(verification="maybe"))
    with pytest.raises(ValueError, match="cannot have status ok"):
        validate(make_record(status="ok", verification="failed"))
    assert store.list() == []


def test_compare_gives_ratios_also_of_spreads():
    a = make_record(bandwidth_mbps=100.0, dips=[], latency_us_spread={"min": 10.0, "max": 20.0})
    b = make_record(bandwidth_mbps=95.0, dips=[], latency_us_spread={"min": 12.0, "max": 20.0})
    a["id"], b["id"] = 1, 2
    diff = compare(a, b)
    assert diff["figures"]["bandwidth_mbps"]["ratio"] == pytest.approx(0.95)
    assert diff["figures"]["latency_us_spread.min"]["ratio"] == pytest.approx(1.2)
    assert "dips" not in diff["figures"]  # a list is not a figure to divide


def test_compare_gives_no_ratio_with_a_run_that_is_not_ok():
    """A run that failed verification is reported as failed, never as a number: no ratio
    of its figures, and the comparison says which run and why; both statuses are shown."""
    a = make_record(mops_total=100.0, np=2)
    b = make_record(status="failed", verification="failed", mops_total=35.6, np=2)
    a["id"], b["id"] = 1, 2
    diff = compare(a, b)
    assert diff["figures"]["mops_total"] == {"a": 100.0, "b": 35.6, "ratio": None}
    assert all(row["ratio"] is None for row in diff["figures"].values())
    assert diff["no_ratio"] == "run 2 is failed (verification failed)"
    assert [(r["id"], r["status"], r["verification"]) for r in diff["runs"]] == [
        (1, "ok", "passed"),
        (2, "failed", "failed"),
    ]
    b.update(status="ok", verification="passed")
    assert compare(a, b)["figures"]["mops_total"]["ratio"] == pytest.approx(0.356)
    assert compare(a, b)["no_ratio"] is None


def test_csv_row_flattens_scalar_figures_and_spreads():
    record = make_record(gflops=45.9, per_phase={"pfact": 1.0}, curve=[1, 2])
    record["id"] = 3
    row = flatten_for_csv(record)
    assert row["fig.gflops"] == 45.9
    assert row["fig.per_phase.pfact"] == 1.0
    assert "fig.curve" not in row
    assert row["mpi"] == "openmpi" and row["np"] == 2


def test_default_path_honours_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERTUNE_DB", str(tmp_path / "x" / "r.db"))
    assert Store().path == tmp_path / "x" / "r.db"
    assert (tmp_path / "x" / "r.db").exists()


def test_unwritable_database_is_a_user_error(tmp_path):
    from clustertune.errors import UserError

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="results database"):
        Store(blocker / "results.db")


def test_writer_killed_mid_transaction_keeps_earlier_runs(store):
    """A run killed half-way (inside its transaction) leaves the earlier runs intact."""
    store.save(make_record(latency_us=1.0))
    store.save(make_record(latency_us=2.0))
    script = textwrap.dedent(
        f"""
        import sqlite3, sys, time
        conn = sqlite3.connect({str(store.path)!r})
        conn.execute("BEGIN")
        conn.execute("INSERT INTO runs (started, level, kernel, cluster, status, verification, record)"
                     " VALUES ('x', 'half', 'k', 'c', 'ok', 'passed', 'not json')")
        print("inside", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "inside"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    reopened = Store(store.path)
    assert [r["figures"]["latency_us"] for r in reopened.list()] == [1.0, 2.0]
    reopened.save(make_record(latency_us=3.0))
    assert len(reopened.list()) == 3
    reopened.close()
