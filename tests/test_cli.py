"""The command line as a user meets it: one JSON document with --json, one-line errors."""

import json
import os
import subprocess
import sys

import pytest
from conftest import unique_name

from clustertune import netns, vcluster

CLI = [sys.executable, "-m", "clustertune.cli"]


def run(*args: str, unprivileged: bool = False) -> subprocess.CompletedProcess:
    argv = [*CLI, *args]
    if unprivileged:
        # A user namespace without a mapping for root: the CLI runs as nobody, with no
        # capability over the machine's namespaces, yet its files are still reachable
        # wherever the checkout lives (root's home is mode 700), unlike setpriv/su nobody.
        argv = ["unshare", "--user", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def one_json(proc: subprocess.CompletedProcess):
    return json.loads(proc.stdout)  # fails on anything but exactly one document


def assert_user_error(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("clustertune: error: ")
    for fragment in fragments:
        assert fragment in proc.stderr


def test_probe_json_then_results_and_report(tmp_path):
    probe = run("probe", "--np", "2", "--json")
    assert probe.returncode == 0, probe.stderr
    record = one_json(probe)
    assert record["verification"] == "passed"
    listed = one_json(run("results", "list", "--json"))
    assert [r["id"] for r in listed] == [record["id"]]
    shown = one_json(run("results", "show", str(record["id"]), "--json"))
    assert shown["samples"] == record["samples"]
    second = one_json(run("probe", "--np", "1", "--json"))
    diff = one_json(run("results", "compare", str(record["id"]), str(second["id"]), "--json"))
    assert diff["figures"]["ranks"] == {"a": 2, "b": 1, "ratio": 0.5}
    csv_text = run("results", "export", "--format", "csv").stdout.splitlines()
    assert csv_text[0].startswith("id,started,level,kernel") and len(csv_text) == 3
    assert len(one_json(run("results", "export", "--format", "json", "--json"))) == 2
    out = tmp_path / "r.html"
    report = one_json(run("report", "--out", str(out), "--json"))
    html = out.read_text()
    assert report["report"] == str(out)
    assert "Launch chain (probe)" in html and "<svg" in html
    assert "<script" not in html and "<link" not in html  # self-contained


def test_compare_shows_each_runs_status_and_no_ratio_of_a_failed_run():
    from clustertune.cluster import local_cluster
    from clustertune.results import Store
    from clustertune.runner import new_record

    store = Store()  # the private database the CLI below uses too
    for status, verification, mops in (("ok", "passed", 100.0), ("failed", "failed", 35.6)):
        record = new_record("npb", "ct-npb-ep", local_cluster(), {}, ["localhost"], 2, "openmpi")
        record.update(status=status, verification=verification, figures={"mops_total": mops})
        store.save(record)
    store.close()
    out = run("results", "compare", "1", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        "run 1: npb/ct-npb-ep ok, verification passed",
        "run 2: npb/ct-npb-ep failed, verification failed",
        "no ratios: run 2 is failed (verification failed)",
    ]
    (row,) = [ln for ln in lines if ln.startswith("mops_total")]
    assert row.split()[-1] == "-" and "0.356" not in out.stdout


def test_report_out_that_cannot_be_written_is_one_line(tmp_path):
    assert_user_error(run("report", "--out", str(tmp_path)), f"--out {tmp_path}: is a directory")
    (tmp_path / "file").write_text("")
    out = run("report", "--out", str(tmp_path / "file" / "r.html"))
    assert_user_error(out, "cannot write the report", str(tmp_path / "file"))
    assert len(out.stderr.splitlines()) == 1


def test_info_json_describes_this_host():
    facts = one_json(run("info", "--json"))
    (host,) = facts["hosts"]
    assert host["cpu"]["cores"] == os.cpu_count()
    assert host["memory_bytes"] > 0
    assert "openmpi" in host["mpi"]


@pytest.mark.parametrize(
    "args, fragments",
    [
        (
            ["vcluster", "up", "--name", "x", "--hosts", "2", "--link", "fast"],
            ["bad link rate 'fast'"],
        ),
        (
            ["vcluster", "up", "--name", "x", "--hosts", "2", "--host-link", "host9=1gbit"],
            ["host9"],
        ),
        (["vcluster", "up", "--name", "x", "--hosts", "4", "--sites", "2"], ["--wan-link"]),
        (["probe", "--cluster", "nosuch"], ["no such cluster file"]),
        (["probe", "--cluster", "/nonexistent/c.toml"], ["cannot read cluster file"]),
        (["results", "show", "99"], ["no run with id 99"]),
    ],
)
def test_user_errors_are_one_line(args, fragments):
    assert_user_error(run(*args), *fragments)


@pytest.mark.parametrize(
    "args",
    [
        ["results", "list"],
        ["report"],
        ["vcluster", "status"],
        ["study", "list"],
        ["grid", "status"],
    ],
)
def test_commands_that_do_not_read_a_cluster_refuse_cluster(args):
    """--cluster was accepted and ignored here (results list --cluster X listed everything)."""
    proc = run(*args, "--cluster", "lab.toml")
    assert proc.returncode == 2 and "unrecognized arguments: --cluster" in proc.stderr


def test_output_into_a_reader_that_leaves_early_is_not_an_error(tmp_path):
    """`clustertune ... | head -1`: the reader has gone before the text is written; the
    command ends with its own status, no BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [*CLI, "study", "list", "--db", str(tmp_path / "r.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # before the CLI has imported itself: its one write meets EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and "BrokenPipe" not in err


def test_user_error_with_json_still_prints_one_document():
    proc = run("probe", "--cluster", "nosuch", "--json")
    assert proc.returncode == 2
    assert "no such cluster" in one_json(proc)["error"]


def test_bad_cluster_file_names_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('name = "lab"\n[[hosts]]\nname = "n1"\ncores = 0\n')
    assert_user_error(run("probe", "--cluster", str(path)), f"{path}:4: hosts[0].cores")


@pytest.mark.root
def test_without_root_vcluster_says_so_and_local_runs_still_work(tmp_path):
    whoami = subprocess.run(["unshare", "--user", "id", "-u"], capture_output=True, text=True)
    assert whoami.stdout.strip() == "65534", whoami.stderr  # really not root in there
    assert_user_error(
        run("vcluster", "up", "--name", "x", "--hosts", "2", unprivileged=True),
        "needs root",
        "localhost",
    )
    probe = run("probe", "--np", "1", "--json", "--db", str(tmp_path / "r.db"), unprivileged=True)
    assert probe.returncode == 0, probe.stderr
    assert one_json(probe)["meta"]["cluster"]["launcher"] == "local"


@pytest.mark.root
def test_vcluster_cli_cycle():
    name = unique_name("c")
    try:
        up = one_json(
            run("vcluster", "up", "--name", name, "--hosts", "2", "--link", "100mbit", "--json")
        )
        assert [h["link_bps"] for h in up["hosts"]] == [10**8, 10**8]
        clash = run("vcluster", "up", "--name", name, "--hosts", "2")
        assert_user_error(clash, "already up")
        status = one_json(run("vcluster", "status", "--json"))
        assert any(c["name"] == name and c["healthy"] for c in status)
        probe = one_json(run("probe", "--cluster", name, "--np", "2", "--mpi", "mpich", "--json"))
        assert {s["host"] for s in probe["samples"]} == {"host0", "host1"}
        assert one_json(run("vcluster", "down", "--name", name, "--json"))["removed"] is True
    finally:
        vcluster.down(name)
    assert not [ns for ns in netns.listed() if ns.startswith(vcluster.prefix(name))]
