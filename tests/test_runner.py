"""How a kernel's output and exit become a record's status and verification."""

import pytest

from clustertune.cluster import local_cluster
from clustertune.kernels import KernelOutput, parse_output
from clustertune.launch import Completed
from clustertune.runner import complete_record, new_record


def record():
    return new_record("probe", "ct-test", local_cluster(), {}, ["localhost"], 2, "openmpi")


def completed(returncode=0, timed_out=False, stderr=""):
    return Completed(["mpirun", "x"], returncode, "", stderr, 1.5, timed_out)


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


def test_verified_run_is_ok():
    output = KernelOutput([{"x": 1}], {"verification": "passed", "figures": {"ranks": 2}})
    r = complete_record(record(), completed(), output)
    assert (r["status"], r["verification"], r["error"]) == ("ok", "passed", None)
    assert r["figures"] == {"ranks": 2}


def test_failed_verification_is_failed_even_with_numbers():
    output = KernelOutput([{"x": 1}], {"verification": "failed", "figures": {"gflops": 40.0}})
    r = complete_record(record(), completed(), output)
    assert r["status"] == "failed"
    assert r["error"].startswith("verification failed")


def test_samples_without_result_are_kept_as_incomplete():
    output = KernelOutput([{"size": 1}, {"size": 2}], None, ["peer vanished"])
    r = complete_record(record(), completed(returncode=1, stderr="boom"), output)
    assert r["status"] == "incomplete"
    assert r["samples"] == [{"size": 1}, {"size": 2}]
    assert "peer vanished" in r["error"] and "boom" in r["error"]


def test_timeout_is_failed_and_says_so():
    output = KernelOutput([{"size": 1}], None)
    r = complete_record(record(), completed(returncode=-9, timed_out=True), output)
    assert r["status"] == "failed"
    assert "timed out" in r["error"]
    assert r["samples"] == [{"size": 1}]


def test_nonzero_exit_after_result_is_failed():
    output = KernelOutput([], {"verification": "passed", "figures": {}})
    r = complete_record(record(), completed(returncode=3), output)
    assert r["status"] == "failed"
    assert "exit status 3" in r["error"]


def test_derive_adds_figures_and_reports_analysis_errors():
    output = KernelOutput([{"v": 2}], {"verification": "passed", "figures": {}})
    r = complete_record(record(), completed(), output, lambda s, res: {"double": s[0]["v"] * 2})
    assert r["figures"] == {"double": 4}

    def broken(samples, result):
        raise ValueError("curve too short")

    r = complete_record(record(), completed(), output, broken)
    assert r["status"] == "failed"
    assert "analysis: curve too short" in r["error"]


@pytest.mark.parametrize("verification", ["passed", "not-verified"])
def test_verification_is_taken_from_the_kernel(verification):
    output = KernelOutput([], {"verification": verification})
    assert complete_record(record(), completed(), output)["verification"] == verification
