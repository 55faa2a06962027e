"""The C harness is the one way in (issue 21 item 4), read from the kernels' sources: every
MPI program starts through ct_mpi_start (kernels/common/ct_mpi.h), which reads the options
before MPI starts; message tags are defined in ct_mpi.h's ranges only; integer lists are
parsed by ct_parse_int_list (kernels/common/ct_opt.c), no kernel calls strtol itself."""

from __future__ import annotations

import re
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
COMMON = KERNELS / "common"


def sources(*suffixes: str) -> list[Path]:
    return sorted(p for s in suffixes for p in KERNELS.rglob(f"*{s}"))


def code(path: Path) -> str:
    """The text without comments, so that a comment naming a call is not a call."""
    text = re.sub(r"/\*.*?\*/", " ", path.read_text(), flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def name(path: Path) -> str:
    return str(path.relative_to(KERNELS))


def test_every_mpi_program_starts_through_ct_mpi_start() -> None:
    programs = [
        p for p in sources(".c") if re.search(r"\bint main\(", code(p)) and "MPI_" in code(p)
    ]
    # the MPI kernels of today, at least (a new one is held to the same rule)
    assert {"probe/probe.c", "mpi/mpi_pingpong.c", "linpack/linpack.c", "qcd/qcd.c"} <= {
        name(p) for p in programs
    }, [name(p) for p in programs]
    for path in programs:
        assert re.search(r"\b(ct_mpi_start|npb_start)\(", code(path)), name(path)
    starts_mpi = [
        name(p)
        for p in sources(".c")
        if p != COMMON / "ct_mpi.c"
        and re.search(r"\b(ct_mpi_init|MPI_Init|MPI_Init_thread)\(", code(p))
    ]
    assert starts_mpi == [], "MPI started outside ct_mpi_start"


def test_npb_starts_through_ct_mpi_start() -> None:
    assert "ct_mpi_start(" in code(KERNELS / "npb/common/npb.c")


def test_tags_are_defined_in_ct_mpi_h_only() -> None:
    defined = re.compile(
        r"(#define\s+[A-Z0-9_]*TAG[A-Z0-9_]*\b|\b[A-Z0-9_]*TAG[A-Z0-9_]*\s*=(?!=))"
    )
    found = [
        f"{name(p)}: {m.group(0)}"
        for p in sources(".c", ".h")
        if p != COMMON / "ct_mpi.h" and "MPI" in code(p)  # PVM's tags are PVM's
        for m in defined.finditer(code(p))
    ]
    assert found == []
    assert "CT_TAG_NPB_LU_HALO" in code(COMMON / "ct_mpi.h")


def test_integer_lists_have_one_parser() -> None:
    outside = [
        name(p)
        for p in sources(".c")
        if COMMON not in p.parents and re.search(r"\bstrto(l|ll|ul|ull)\(", code(p))
    ]
    assert outside == [], "parse integers with ct_opt (ct_parse_int_list, CT_OPT_INT ...)"
    users = [name(p) for p in sources(".c") if "ct_parse_int_list(" in code(p)]
    assert {"linpack/lp_dat.c", "qcd/qcd.c", "io/io_netcdf.c"} <= set(users), users
