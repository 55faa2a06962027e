"""Bad input is one line naming the file, line and field, or the option (exit 2), before
anything is launched: never a traceback, never a message naming something else."""

from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path

import pytest
from clirun import assert_refused_before_launch

from clustertune.cli import build_parser
from clustertune.cli import main as cli_main
from clustertune.cluster import Cluster, Host, Site
from clustertune.errors import ConfigError, UserError
from clustertune.grid.description import load_grid_file
from clustertune.levels.hosts import info
from clustertune.levels.network import pingpong
from clustertune.runner import new_record
from clustertune.sources import resolve_cluster

HEAD = 'name = "lab"\nmpi = ["openmpi"]\n\n'  # the two readers' first lines alike
CLUSTER = HEAD + '[[hosts]]\nname = "n1"\naddress = "192.0.2.1"\n'
GRID = (
    HEAD
    + """\
[[sites]]
name = "s1"
scheduler = "slurm"
contact = "head:6817"

[[hosts]]
name = "n1"
site = "s1"
address = "192.0.2.1"

[[hosts]]
name = "n2"
site = "s2"

[[sites]]
name = "s2"
scheduler = "none"
"""
)


def refused(path, load, line: int | None, field: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(path)
    message = str(info.value)
    where = f"{path}:{line}" if line else f"{path}"
    assert message.startswith(f"{where}: {field}: "), message
    assert problem in message, message


# Both readers share tomlfile's type checks: each wrong type is named the same way in both
# (the line in the cluster file, the line in the grid description).
TYPE_CASES = [
    ('mpi = ["openmpi"]', "mpi = 5", 2, 2, "mpi", "expected one or an array of openmpi, mpich"),
    ('mpi = ["openmpi"]', "mpi = []", 2, 2, "mpi", "expected one or an array"),
    ('mpi = ["openmpi"]', 'mpi = ["openmpi", 5]', 2, 2, "mpi", "5 is not one of"),
    ('address = "192.0.2.1"', "address = 5", 6, 12, "hosts[0].address", "expected a string, got 5"),
    ('name = "lab"', "name = 5", 1, 1, "name", "expected a string, got 5"),
]  # fmt: skip


@pytest.mark.parametrize("old, new, line, _, field, problem", TYPE_CASES)
def test_cluster_file_field_types(tmp_path, old, new, line, _, field, problem):
    path = tmp_path / "c.toml"
    path.write_text(CLUSTER.replace(old, new, 1))
    refused(str(path), resolve_cluster, line, field, problem)  # as --cluster gives it


@pytest.mark.parametrize("old, new, _, line, field, problem", TYPE_CASES)
def test_grid_description_field_types(tmp_path, old, new, _, line, field, problem):
    path = tmp_path / "g.grid.toml"
    path.write_text(GRID.replace(old, new, 1))
    refused(path, load_grid_file, line, field, problem)


@pytest.mark.parametrize(
    "text, line, field, problem",
    [
        ('hosts = ["n1"]\n', 1, "hosts", "expected [[hosts]] tables, got ['n1']"),
        ("slurm = 3\n" + CLUSTER, 1, "slurm", "expected a table, got 3"),
        (CLUSTER + "[slurm]\npartition = 3\n", 8, "slurm[0].partition", "expected a string"),
        (CLUSTER + "[slurm]\npartiton = 'x'\n", 8, "slurm[0].partiton", "unknown field"),
        ('sites = "tokyo"\n' + CLUSTER, 1, "sites", "expected [[sites]] tables"),
        (CLUSTER + "cores = true\n", 7, "hosts[0].cores", "expected an integer, got True"),
        (CLUSTER + "site = 1\n", 7, "hosts[0].site", "expected a string, got 1"),
    ],
)
def test_cluster_file_structure(tmp_path, text, line, field, problem):
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent(text))
    refused(str(path), resolve_cluster, line, field, problem)


LINK = '[[links]]\nsites = ["s1", "s2"]\nrate = "1gbit"\n'


@pytest.mark.parametrize(
    "old, new, line, field, problem",
    [
        ('name = "lab"', 'links = ["s1"]', 1, "links", "expected [[links]] tables"),
        ("", LINK + 'delay_us = "5"\n', 24, "links[0].delay_us", "expected an integer, got '5'"),
        ('contact = "head:6817"', "contact = 6817", 7, "sites[0].contact", "expected a string"),
        (
            'contact = "head:6817"',
            'contact = "h"\npartition = 2',
            8,
            "sites[0].partition",
            "expected a string, got 2",
        ),
        (
            'contact = "head:6817"',
            'contact = "h"\nlauncher = 2',
            8,
            "sites[0].launcher",
            "expected a string, got 2",
        ),
    ],
)
def test_grid_description_structure(tmp_path, old, new, line, field, problem):
    path = tmp_path / "g.grid.toml"
    path.write_text(GRID.replace(old, new, 1) if old else GRID + new)
    refused(path, load_grid_file, line, field, problem)


def test_grant_without_a_ca_is_refused(tmp_path):
    """``io ca issue`` checked for the CA, ``grant`` wrote into a missing directory."""
    missing = tmp_path / "nonexistent"
    assert_refused_before_launch(
        ["io", "ca", "grant", "--ca-dir", str(missing), "alice"],
        tmp_path / "r.db",
        f"no CA in {missing}: run 'clustertune io ca init' first",
    )
    assert not missing.exists()


@pytest.mark.parametrize(
    "args, named",
    [
        (
            ["grid", "up", "--name", "fbx", "--sites", "0", "--hosts-per-site", "2"],
            "--sites 0: must be between 1 and 50",
        ),
        (
            [
                "grid",
                "up",
                "--name",
                "fbx",
                "--sites",
                "5",
                "--hosts-per-site",
                "50",
                "--wan-link",
                "1gbit",
            ],
            "--sites 5 x --hosts-per-site 50: a virtual grid has at most",
        ),
        (["net", "pingpong", "--max-size", "0"], "--max-size 0 B: must be between 1 B and 1 GiB"),
    ],
)
def test_messages_name_the_option_given(tmp_path, args, named):
    assert_refused_before_launch(args, tmp_path / "r.db", named)


def test_a_size_check_names_its_callers_option():
    """net matrix says --size, not net pingpong's --max-size (the check is pingpong's)."""
    with pytest.raises(UserError, match=r"^--size 0 B: must be between 1 B and 1 GiB$"):
        pingpong.check_size(0, "--size")


@pytest.mark.parametrize(
    "args, value",
    [
        (["probe"], "-5"),
        (["npb", "ep"], "-1"),
        (["npb", "ep"], "0"),
        (["probe"], "nan"),
        (["net", "pingpong"], "inf"),
    ],
)
def test_timeout_must_be_positive(tmp_path, capsys, args, value):
    """Refused by the parser (exit 2) instead of a job launched, killed at once, stored as
    failed and exit 1."""
    db = tmp_path / "r.db"
    with pytest.raises(SystemExit) as exited:
        cli_main([*args, "--timeout", value, "--db", str(db)])
    assert exited.value.code == 2
    out = capsys.readouterr()
    said = f"error: argument --timeout: expected a positive number of seconds, got '{value}'"
    assert out.err.strip().splitlines()[-1].endswith(said), out.err
    assert out.out == "" and not db.exists()


# --- an unreachable host, in the report --------------------------------------------------


def _hosts_record(run_id: int, cluster: str, answered: list[str], status: str, **more) -> dict:
    lab = Cluster(cluster, (Host("host0"), Host("host1")), (Site("site0", "local"),))
    record = new_record("hosts", "hostinfo", lab, {}, ["host0", "host1"], 1)
    facts = {
        "site": "site0",
        "nominal_link_bps": 10**9,
        "memory_bytes": 2**30,
        "cpu": {"model": "cpu-model", "cores": 2, "isa": ["avx2"]},
        "blas": {"openblas_core": "Haswell"},
        "mpi": {"openmpi": "4.1", "mpich": "4.0"},
    }
    record.update(id=run_id, status=status, samples=[{"name": n} | facts for n in answered])
    record.update(more)
    return record


def test_hosts_section_names_the_unreachable_host_and_keeps_the_last_inventory():
    """The section showed only the latest record: after an info with an unreachable host,
    "Cluster lab, run 3" and an empty table, the host and its reason nowhere."""
    reason = "ssh: connect to host 192.0.2.2 port 22: No route to host"
    page = info.section(
        [
            _hosts_record(1, "lab", ["host0", "host1"], "ok"),
            _hosts_record(2, "other", ["host0"], "failed", error="host1: exit status 255\ntail"),
            _hosts_record(3, "lab", ["host0"], "failed", detail={"unreachable": {"host1": reason}}),
        ]
    )
    lab, other = page.split("<h3>Cluster other</h3>")
    assert "Latest run 3 (failed): could not read 1 host(s)" in lab
    assert f"<td>host1</td><td>{reason}</td>" in lab
    assert "Inventory: run 1." in lab and lab.count("<td>cpu-model</td>") == 2
    # a record without the detail (stored by earlier versions): its hosts without facts
    assert "<td>host1</td><td>host1: exit status 255</td>" in other
    assert "No run has read every host of this cluster." in other


# --- the README's "Using it" block, against the parser -----------------------------------


README = Path(__file__).parents[1] / "README.md"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def _usage_lines() -> list[str]:
    text = README.read_text()
    block = text.split("## Using it", 1)[1].split("\n* ", 1)[0].replace("\\\n", " ")
    return [
        line.strip().removeprefix("clustertune ")
        for line in block.splitlines()
        if line.strip().startswith("clustertune ")
    ]


def _documented_commands() -> set[str]:
    """The commands (and actions) the usage blocks of docs/*.md name: a level added later
    shows its commands on its own page, with no edit of the README."""
    top = _subparsers(build_parser())
    found = set()
    for page in sorted((README.parent / "docs").glob("*.md")):
        for line in page.read_text().splitlines():
            words = line.strip().removeprefix("clustertune ").split()
            if not line.startswith("    clustertune ") or not words or words[0] not in top:
                continue
            actions = _subparsers(top[words[0]])
            named = words[1].split("|") if len(words) > 1 and actions else [""]
            found |= {f"{words[0]} {a}".strip() for a in named if not a or a in actions}
    return found


def test_readme_usage_is_what_the_parser_takes():
    """Each option a usage line shows exists on each command it names, each value it lists
    is a choice of it (net matrix --layer pvm, gemm --dat were not), and every command and
    action is shown (study, grid info|compare, tune qcd were not; vcluster set has its own
    paragraph), in the README or in the docs page of its level."""
    top = _subparsers(build_parser())
    shown, wrong = set(), []
    for line in _usage_lines():
        commands: list[str] = []
        for segment in line.split(" | "):
            words = segment.split("#")[0].split()
            first = words[0].split("|")  # "linpack|gemm", "npb ep|lu|bt": each
            if not commands or (
                all(w in top for w in first)  # "... | tune tcp ...": a new command
                and not any(w in _subparsers(top[c]) for c in commands for w in first)
            ):
                if not all(w in top for w in first):
                    wrong.append(f"{line}: {words[0]} is no command")
                    break
                commands, words = first, words[1:]
            parsers, actions = [top[c] for c in commands], [""]
            while words and (known := _subparsers(parsers[0])):
                named = words[0].split("|")
                if not all(a in known for a in named):
                    break
                if actions == [""]:
                    actions = named
                parsers, words = [known[a] for a in named], words[1:]
            shown.update(f"{c} {a}".strip() for c in commands for a in actions)
            for at, word in enumerate(words):
                option = word.strip("[]")
                if not re.fullmatch(r"--?[A-Za-z][\w-]*", option):
                    continue
                value = words[at + 1].strip("[]") if at + 1 < len(words) else ""
                for parser in parsers:
                    action = parser._option_string_actions.get(option)
                    if action is None:
                        wrong.append(f"{line}: {option} is no option of {parser.prog}")
                    elif action.choices and not value.startswith("-"):
                        wrong += [
                            f"{line}: {option} {v}: not a choice of {parser.prog}"
                            for v in value.split("|")
                            if v not in action.choices
                        ]
    assert not wrong, "\n".join(wrong)
    every = {f"{c} {a}".strip() for c, p in top.items() for a in (_subparsers(p) or [""])}
    missing = every - shown - _documented_commands() - {"vcluster set"}  # its own paragraph
    assert not missing, f"commands shown neither in the README nor in docs/: {missing}"
    assert "`clustertune vcluster set --name N --host host2" in README.read_text()
