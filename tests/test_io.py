"""The I/O level, local: ct-io-netcdf's collective and independent write and read through
the CLI, every file checked (ncvalidator, ncdump -h, netCDF4 read-back), failures that
must fail (a corrupted value, a corrupt file), and bad input refused before a launch."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import netCDF4
import numpy as np
import pytest
from clirun import cli
from conftest import run_test_without_build

from clustertune import kernels
from clustertune.cluster import local_cluster
from clustertune.levels.io import netcdf, section, validate


@pytest.fixture(scope="module")
def built() -> None:
    """ct-io-netcdf, built by 'make setup': missing is an error here, never a skip (a skip
    hid every test of the level, and a bug in kernel_path with them)."""
    kernels.kernel_path(netcdf.NETCDF_KERNEL, "openmpi")


def test_local_collective_and_independent_write_and_read(built, tmp_path) -> None:
    out = cli(
        "io",
        "netcdf",
        "--np",
        "2",
        "--sizes",
        "16,33",
        "--reps",
        "3",
        "--json",
        "--dir",
        str(tmp_path),
        "--keep-files",
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "ok" and doc["verification"] == "passed"
    assert doc["mpiio_driver"] == "romio"  # pinned, not OpenMPI's default OMPIO
    rows = doc["results"]
    for key in netcdf.RESULT_KEYS:
        assert all(key in r for r in rows), key
    combos = {(r["size"], r["op"], r["mode"], r["variant"]) for r in rows}
    assert combos == {
        (n, op, mode, v)
        for n in (16, 33)
        for op in ("write", "read")
        for mode in ("collective", "independent")
        for v in ("netcdf", "raw", "rawswap")
    }
    assert all(r["valid"] and r["np"] == 2 and r["remote"] is None for r in rows)
    assert all(0 < r["io_only_s_min"] <= r["open_to_close_s_min"] for r in rows)
    # the files the run checked are valid netCDF holding the pattern (33: odd split 17+16)
    for mode in ("collective", "independent"):
        f = tmp_path / f"ct_io_netcdf_33_{mode}.nc"
        assert subprocess.run(["ncvalidator", "-q", str(f)]).returncode == 0
        with netCDF4.Dataset(f) as ds:
            assert ds.data_model == "NETCDF3_CLASSIC"
            assert np.array_equal(ds["data"][:], validate.expected(33))
    assert not list(tmp_path.glob("*.bin"))  # raw files are never left behind


def test_cdf5_one_mode_one_op(built, tmp_path) -> None:
    out = cli(
        "io",
        "netcdf",
        "--np",
        "1",
        "--sizes",
        "20",
        "--reps",
        "2",
        "--mode",
        "independent",
        "--ops",
        "write",
        "--format",
        "cdf5",
        "--no-raw",
        "--json",
        "--dir",
        str(tmp_path),
        "--keep-files",
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["results"]
    assert [(r["op"], r["mode"], r["variant"], r["format"]) for r in rows] == [
        ("write", "independent", "netcdf", "cdf5")
    ]
    kind = subprocess.run(
        ["ncdump", "-k", str(tmp_path / "ct_io_netcdf_20_independent.nc")],
        capture_output=True,
        text=True,
    )
    assert kind.stdout.strip() == "cdf5"


def test_variants_run_in_the_order_asked(built, store) -> None:
    record = netcdf.measure(
        local_cluster(),
        store,
        np=1,
        mpi="openmpi",
        sizes=[12],
        mode="collective",
        ops=["write", "read"],
        fmt="cdf1",
        reps=1,
        variants=["rawswap", "netcdf"],
        warmup=1,
    )
    assert record["status"] == "ok", record["error"]
    rows = netcdf.results(record)
    # repetitions interleave (each op's results come out together, in the order asked)
    assert [(r["op"], r["variant"]) for r in rows] == [
        ("write", "rawswap"),
        ("write", "netcdf"),
        ("read", "rawswap"),
        ("read", "netcdf"),
    ]
    assert all(r["reps"] == 1 for r in rows) and record["params"]["warmup"] == 1
    assert all(0 < r["cpu_s_min"] <= r["cpu_s_median"] for r in rows)  # all ranks' CPU time
    path = kernels.kernel_path(netcdf.NETCDF_KERNEL, "openmpi")
    for bad in ("netcdf,netcdf", "raw,zip", "raw,"):
        out = subprocess.run(
            [str(path), "--variants", bad, "--dir", "/tmp"], capture_output=True, text=True
        )
        assert out.returncode == 2 and "--variants" in out.stderr, bad


def test_a_corrupted_value_fails_the_run_and_its_files(built, store, tmp_path) -> None:
    """One repetition: the read of the corrupted file must fail too (the read's injected
    flip once undid the write's), and no invalid row shows a time, rate or ratio."""
    tmp_path = tmp_path / "files"
    tmp_path.mkdir()
    record = netcdf.measure(
        local_cluster(),
        store,
        np=2,
        mpi="openmpi",
        sizes=[16],
        mode="collective",
        ops=["write", "read"],
        fmt="cdf2",
        reps=1,
        directory=str(tmp_path),
        inject_fault=True,
    )
    assert record["status"] == "failed" and record["verification"] == "failed"
    rows = netcdf.results(record)
    assert len(rows) == 6 and not any(r["valid"] for r in rows)
    assert all(r[k] is None for r in rows for k in netcdf.MEASURED)
    checks = {(r["op"], r["variant"]): r["failed_checks"] for r in rows}
    assert checks[("write", "netcdf")] == ["kernel check", "netcdf4"]
    assert checks[("read", "rawswap")] == ["kernel check"]
    # the file itself holds the wrong value: the netCDF4 read-back saw it too
    assert "netCDF4 read-back: 1 values differ" in record["error"]
    # the kernel's exit status 1 comes with its reason
    for op in ("write", "read"):
        for variant in netcdf.VARIANTS:
            assert f"N=16 collective {op} {variant}: data differ" in record["error"], (op, variant)
    assert record["figures"]["write_over_rawswap"] == {"16": None}
    text = netcdf.text(record)
    table = text.splitlines()[2:8]
    assert all(ln.endswith("NO") and "FAILED (kernel check" in ln for ln in table), table
    assert not any("." in ln.split(maxsplit=5)[5] for ln in table), table  # no 1.234 ms
    assert "N=16: none (a row is not valid)" in text
    assert record["figures"]["files"][str(tmp_path / "ct_io_netcdf_16_collective.nc")] == {
        "ncvalidator": True,
        "ncdump": True,
        "netcdf4": False,
    }
    assert not list(tmp_path.iterdir())  # files removed after the checks
    assert "io" in section.render([record]) and "Failed" in section.render([record])


def test_readback_names_a_wrong_value_and_a_wrong_shape(tmp_path) -> None:
    path = tmp_path / "f.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_DATA") as ds:
        for d in validate.DIMENSIONS:
            ds.createDimension(d, 4)
        v = ds.createVariable("data", "i4", validate.DIMENSIONS)
        data = validate.expected(4)
        data[3, 2, 1] = -7
        v[:] = data
    assert validate.readback(path, 4) == "1 values differ, first at (z=3, y=2, x=1)"
    assert validate.readback(path, 5).startswith("data is int32[4, 4, 4]")
    (tmp_path / "bad.nc").write_bytes(b"CDF\x01garbage")
    assert validate.readback(tmp_path / "bad.nc", 4) is not None
    assert validate.header_ok(
        "dimensions:\n\tz = 4 ;\n\ty = 4 ;\n\tx = 4 ;\nvariables:\n\tint data(z, y, x) ;\n", 4
    )
    assert not validate.header_ok("dimensions:\n\tz = 4 ;\n", 4)


def test_derive_ratio_against_raw_with_swap() -> None:
    def s(variant: str, size: int, t: float) -> dict:
        return {
            "variant": variant,
            "size": size,
            "op": "write",
            "mode": "collective",
            "open_to_close_s": {"min": t},
            "verified": True,
        }

    figures = netcdf.derive(
        [
            s("netcdf", 128, 0.012),
            s("rawswap", 128, 0.010),
            s("raw", 128, 0.005),
            s("netcdf", 16, 1.0),
        ],
        None,
    )
    assert figures == {"write_over_rawswap": {"128": pytest.approx(1.2)}}
    # valid rows only: a sample the kernel failed, or whose file failed a check, has none
    bad = s("rawswap", 64, 0.010) | {"verified": False}
    file = s("netcdf", 32, 0.012) | {"file": "/x/32.nc"}
    figures = netcdf.derive(
        [s("netcdf", 64, 0.012), bad, file, s("rawswap", 32, 0.010)],
        None,
        {"/x/32.nc": {"ncvalidator": True, "netcdf4": False}},
    )
    assert figures == {"write_over_rawswap": {"64": None, "32": None}}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--sizes", "16,0"], "--sizes"),
        (["--sizes", "16,"], "--sizes"),
        (["--ops", "write,append"], "--ops"),
        (["--reps", "0"], "--reps"),
        (["--mpi", "mpich"], "openmpi only"),
        (["--dir", "/nonexistent/dir"], "--dir"),
        (["--format", "cdf4"], "--format"),
    ],
)
def test_bad_input_is_refused_before_a_launch(args, field) -> None:
    out = cli("io", "netcdf", *args)
    assert out.returncode == 2
    assert field in out.stderr.splitlines()[-1]


def test_kernel_refuses_bad_flags(built) -> None:
    path = kernels.kernel_path(netcdf.NETCDF_KERNEL, "openmpi")
    out = subprocess.run(
        [str(path), "--sizes", "16,abc", "--dir", "/tmp"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "--sizes" in out.stderr
    out = subprocess.run([str(path), "--sizes", "16"], capture_output=True, text=True)
    assert out.returncode == 2 and "--dir: required" in out.stderr


def test_section_draws_write_and_read(built, store, tmp_path) -> None:
    record = netcdf.measure(
        local_cluster(),
        store,
        np=1,
        mpi="openmpi",
        sizes=[8, 16],
        mode="both",
        ops=["write", "read"],
        fmt="cdf1",
        reps=2,
        raw=False,
    )
    assert record["status"] == "ok", record["error"]
    html = section.render([record])
    assert "<svg" in html and "netcdf local collective np=1" in html
    assert Path(record["params"]["dir"]).exists() is False  # the temporary directory is gone


def test_section_shows_valid_results_only_and_no_empty_legend() -> None:
    def sample(op: str, t: float, verified: bool) -> dict:
        return {
            "size": 16,
            "op": op,
            "mode": "collective",
            "variant": "netcdf",
            "np": 2,
            "format": "cdf1",
            "bytes": 16384.0,
            "reps": 1,
            "verified": verified,
            "open_to_close_s": {"min": t, "median": t},
            "io_only_s": {"min": t, "median": t},
            "mbps": 16384 / t / 1e6,
            "mbps_io": 16384 / t / 1e6,
        }

    record = {
        "id": 7,
        "level": "io",
        "status": "failed",
        "error": "verification failed",
        "params": {},
        "figures": {},
        "detail": {"mpiio_driver": "romio"},
        "meta": {"cluster": {"name": "vc"}, "np": 2},
        "samples": [sample("write", 0.0123456, False), sample("read", 0.0024680, True)],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warned of a legend without lines
        html = section.render([record])
    assert "2.468" in html and "12.346" not in html  # the read's time, not the failed write's
    assert "Failed or incomplete runs: 7 (verification failed)" in html


@pytest.mark.parametrize(
    "test",
    [
        "tests/test_io.py::test_cdf5_one_mode_one_op",
        "tests/test_io_remote.py::test_a_grid_mapfile_area_leading_out_of_the_export_is_refused",
    ],
)
def test_missing_kernels_fail_the_io_tests_never_skip_them(tmp_path, test) -> None:
    """Issue 20 item 9: the I/O suites' fixtures turned any exception of kernel_path (a
    kernel not built, or a bug) into a skip, so the whole security suite could vanish."""
    out = run_test_without_build(test, tmp_path)
    assert "not built" in out.stdout
