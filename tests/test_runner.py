"""How launches become one record: status, verification, errors, several processes per
run, services beside a job, user errors and interruptions half-way, environment knobs."""

import json
import re
import sys
import time

import pytest

from clustertune.cluster import local_cluster
from clustertune.errors import UserError
from clustertune.kernels import parse_output
from clustertune.launch.launchers import launcher_for
from clustertune.launch.process import Completed
from clustertune.runner import Run, env_knobs


def lines(*items: dict) -> str:
    return "\n".join(json.dumps(i) for i in items)


def sample(**kw):
    return {"type": "sample", **kw}


def result(verification="passed", **figures):
    return {"type": "result", "verification": verification, "figures": figures}


def completed(stdout="", returncode=0, timed_out=False, stderr=""):
    return Completed(["mpirun", "x"], returncode, stdout, stderr, 1.5, timed_out)


def finished(store, *steps: Completed, derive=None, service: Completed | None = None) -> dict:
    """A run whose launches wrote ``steps`` (and a service that wrote ``service``)."""
    with Run(local_cluster(), store, level="probe", kernel="ct-test", derive=derive) as run:
        for i, step in enumerate(steps):
            run.add(f"step{i}", step)
        if service is not None:
            run.add("server", service, is_service=True)
    return store.get(run.record["id"])


def test_parse_output_skips_noise_and_truncated_lines():
    text = "\n".join(
        [
            "Warning: some MPI chatter {not json",
            '{"type":"sample","size":1,"t_min_s":1e-5}',
            "[1]",
            '{"type":"sample","size":2,"t_min_s":2e-5}',
            '{"type":"error","message":"peer vanished"}',
            '{"type":"sample","size":4,"t_m',  # cut short by a kill
        ]
    )
    out = parse_output(text)
    assert [s["size"] for s in out.samples] == [1, 2]
    assert out.result is None
    assert out.errors == ["peer vanished"]


def test_verified_run_is_ok(store):
    r = finished(store, completed(lines(sample(x=1), result(ranks=2))))
    assert (r["status"], r["verification"], r["error"]) == ("ok", "passed", None)
    assert r["figures"] == {"ranks": 2}
    assert r["meta"]["commands"] == [["mpirun", "x"]]


def test_failed_verification_is_failed_even_with_numbers(store):
    r = finished(store, completed(lines(sample(x=1), result("failed", gflops=40.0))))
    assert r["status"] == "failed"
    assert r["error"].startswith("verification failed")


def test_a_job_killed_by_a_signal_names_what_the_launcher_said(store):
    """MPICH's hydra reports a rank's death by a signal on stdout (exit status = the signal,
    e.g. 1 for SIGHUP), not on stderr: this was MPICH's own text."""
    hydra = "\n".join(
        [
            "",
            "=" * 83,
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
            "=   PID 28326 RUNNING AT vm",
            "=   EXIT CODE: 1",
            "=" * 83,
            "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Hangup (signal 1)",
        ]
    )
    r = finished(store, completed(lines(sample(size=1)) + hydra, returncode=1))
    assert r["status"] == "incomplete"
    assert r["error"].startswith("exit status 1; the launcher said: ")
    assert "EXIT CODE: 1" in r["error"] and "Hangup (signal 1)" in r["error"]
    assert "sample" not in r["error"] and "===" not in r["error"]
    # a kernel that said why itself is not overwritten by the launcher's text
    said = lines({"type": "error", "message": "rank 1: why"}) + hydra
    assert finished(store, completed(said, returncode=1))["error"].startswith("rank 1: why")
    # nor is a job that passed
    ok = finished(store, completed(lines(result(ranks=2)) + hydra))
    assert (ok["status"], ok["error"]) == ("ok", None)


def test_samples_without_result_are_kept_as_incomplete(store):
    out = lines(sample(size=1), sample(size=2), {"type": "error", "message": "peer vanished"})
    r = finished(store, completed(out, returncode=1, stderr="boom"))
    assert r["status"] == "incomplete"
    assert r["samples"] == [{"size": 1}, {"size": 2}]
    assert "peer vanished" in r["error"] and "boom" in r["error"]


def test_timeout_is_failed_and_says_so(store):
    r = finished(store, completed(lines(sample(size=1)), returncode=-9, timed_out=True))
    assert r["status"] == "failed"
    assert "timed out" in r["error"]
    assert r["samples"] == [{"size": 1}]


def test_nonzero_exit_after_result_is_failed(store):
    r = finished(store, completed(lines(result()), returncode=3))
    assert r["status"] == "failed"
    assert "exit status 3" in r["error"]


def test_derive_adds_figures_and_reports_analysis_errors(store):
    out = completed(lines(sample(v=2), result()))
    r = finished(store, out, derive=lambda s, res: {"double": s[0]["v"] * 2})
    assert r["figures"] == {"double": 4}

    def broken(samples, result):
        raise ValueError("curve too short")

    r = finished(store, out, derive=broken)
    assert r["status"] == "failed"
    assert "analysis: curve too short" in r["error"]


@pytest.mark.parametrize("verification", ["passed", "not-verified"])
def test_verification_is_taken_from_the_kernel(store, verification):
    r = finished(store, completed(lines(result(verification))))
    assert r["verification"] == verification


def test_several_steps_make_one_record_and_name_the_faulty_one(store):
    r = finished(
        store,
        completed(lines(sample(size=1), result())),
        completed(lines(sample(size=2)), returncode=1, stderr="second died"),
    )
    assert [s["size"] for s in r["samples"]] == [1, 2]
    assert len(r["meta"]["commands"]) == 2
    assert r["status"] == "failed" and "step1: exit status 1" in r["error"]
    assert "second died" in r["error"]


def test_a_service_that_saw_corrupt_data_fails_the_run_but_its_exit_is_not_judged(store):
    client = completed(lines(sample(size=1), result()))
    killed_server = completed("", returncode=-15)  # stopped by the run: no problem
    assert finished(store, client, service=killed_server)["status"] == "ok"
    corrupt = completed(lines(result("failed")), stderr="payload mismatch at byte 7")
    r = finished(store, client, service=corrupt)
    assert (r["status"], r["verification"]) == ("failed", "failed")
    assert "payload mismatch at byte 7" in r["error"]  # the server's words stay with the run


def test_user_error_after_a_launch_keeps_what_was_measured(store):
    with pytest.raises(UserError), Run(local_cluster(), store, level="probe", kernel="k") as run:
        run.add("first", completed(lines(sample(size=1))))
        raise UserError("host1 is unreachable from host0")
    (r,) = store.list()
    assert r["status"] == "failed" and "host1 is unreachable" in r["error"]
    assert r["samples"] == [{"size": 1}]


def test_user_error_before_any_launch_stores_nothing(store):
    with pytest.raises(UserError), Run(local_cluster(), store, level="probe", kernel="k"):
        raise UserError("--max-size too short")
    assert store.list() == []


def test_interrupted_run_is_stored_interrupted_with_its_samples(store):
    with (
        pytest.raises(KeyboardInterrupt),
        Run(local_cluster(), store, level="probe", kernel="k") as run,
    ):
        run.add("sweep", completed(lines(sample(size=1), sample(size=2))))
        raise KeyboardInterrupt
    (r,) = store.list()
    assert r["status"] == "interrupted" and len(r["samples"]) == 2
    assert r["error"].startswith("interrupted by the user")


def test_environment_knobs_of_kernels_blas_and_mpi_are_all_recorded(monkeypatch):
    for name, value in {
        "CT_LINPACK_CHUNK": "1024",
        "OMPI_MCA_btl": "self,tcp",
        "UCX_RNDV_THRESH": "8k",
        "OPENBLAS_CORETYPE": "Haswell",
        "HOME": "/root",
    }.items():
        monkeypatch.setenv(name, value)
    knobs = env_knobs({"LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu/blis-openmp"})
    for name in (
        "CT_LINPACK_CHUNK",
        "OMPI_MCA_btl",
        "UCX_RNDV_THRESH",
        "OPENBLAS_CORETYPE",
        "LD_LIBRARY_PATH",
    ):
        assert name in knobs
    assert "HOME" not in knobs


# --------------------------------------------------------------------------- services

PY = sys.executable


def service(argv, **options):
    return launcher_for(local_cluster()).service(local_cluster().hosts[0].name, argv, **options)


def test_service_is_ready_on_its_line_and_its_output_is_collected():
    script = "import sys,time; print('listening on port 4242', file=sys.stderr, flush=True); print('bye')"
    with service([PY, "-c", script], ready=re.compile(rb"listening on port (\d+)\n")) as s:
        assert int(s.ready_match.group(1)) == 4242
    assert s.completed.returncode == 0 and s.completed.stdout.strip() == "bye"


def test_service_that_never_gets_ready_is_a_user_error_quoting_it():
    refused = service(
        [PY, "-c", "import sys; sys.exit('address already in use')"],
        ready=re.compile(rb"listening"),
    )
    with pytest.raises(UserError, match="cannot start .*address already in use"), refused:
        pass
    begin = time.monotonic()
    silent = service(["sleep", "60"], ready=re.compile(rb"listening"), start_timeout=1)
    with pytest.raises(UserError, match="no answer within 1 s"), silent:
        pass
    assert time.monotonic() - begin < 10


def test_service_is_killed_after_its_grace_and_its_lifetime():
    begin = time.monotonic()
    with service(["sleep", "60"], ready=lambda: True, stop_grace=0.5) as s:
        pass
    assert s.completed.returncode != 0 and time.monotonic() - begin < 10
    with service(["sleep", "60"], ready=lambda: True, lifetime=0.5) as s:
        time.sleep(1.5)
        assert not s.running
    assert s.completed.timed_out


def test_the_record_takes_the_clients_result_never_the_services(store):
    client = completed(lines(sample(size=1), {**result(), "detail": {"role": "client"}}))
    server = completed(lines({**result(), "detail": {"role": "server"}}))
    with Run(local_cluster(), store, level="probe", kernel="k") as run:
        run.add("client", client)
        run.add("server", server, is_service=True, order=0)  # began before the client
    r = store.get(run.record["id"])
    assert r["detail"] == {"role": "client"}
    assert r["meta"]["commands"] == [["mpirun", "x"], ["mpirun", "x"]]


def test_a_composite_run_without_a_result_is_incomplete_not_some_steps(store):
    with Run(local_cluster(), store, level="probe", kernel="k", composite=True) as run:
        run.add("pair a", completed(lines(sample(size=1), result())))
        run.add("pair b", completed(lines(sample(size=2)), returncode=1))
    r = store.get(run.record["id"])
    assert (r["status"], r["verification"]) == ("incomplete", "not-verified")


def test_a_chatty_service_does_not_block_on_its_pipes(tmp_path):
    """200 KB on each pipe after the ready line: more than a pipe holds."""
    done = tmp_path / "done"
    script = (
        "import sys; print('ready', file=sys.stderr, flush=True);"
        "sys.stderr.write('e' * 200000); sys.stdout.write('o' * 200000);"
        "sys.stderr.flush(); sys.stdout.flush();"
        f"open({str(done)!r}, 'w').close()"
    )
    with service([PY, "-c", script], ready=re.compile(rb"ready\n")) as s:
        deadline = time.monotonic() + 10
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done.exists(), "the service blocked writing its output"
    assert len(s.completed.stdout) == 200000 and s.completed.stderr.count("e") >= 200000
