"""Cluster files: valid ones load, invalid ones name file, line and field; sites and
their launchers."""

import textwrap

import pytest

from clustertune.cluster import Cluster, Host, Site
from clustertune.errors import ConfigError, UserError
from clustertune.launch.hostfile import HostfileLauncher
from clustertune.launch.launchers import launcher_for
from clustertune.launch.slurm import SlurmLauncher
from clustertune.sources import resolve_cluster

GOOD = """\
name = "lab"
launcher = "hostfile"
mpi = ["openmpi", "mpich"]
link = "1gbit"

[[sites]]
name = "tokyo"
wan_link = "100mbit"

[[sites]]
name = "tsukuba"
wan_link = "100mbit"

[[hosts]]
name = "node1"
address = "192.0.2.1"
cores = 2
site = "tokyo"

[[hosts]]
name = "node2"
address = "192.0.2.2"
cores = 4
site = "tsukuba"
link = "100mbit"
"""


MULTI = """\
name = "grid"
launcher = "hostfile"

[slurm]
partition = "debug"

[[sites]]
name = "tokyo"

[[sites]]
name = "tsukuba"
launcher = "slurm"
wan_link = "10mbit"

[[hosts]]
name = "node1"
site = "tokyo"

[[hosts]]
name = "node2"
site = "tsukuba"

[[hosts]]
name = "node3"
site = "tsukuba"
"""


def write(tmp_path, text):
    path = tmp_path / "cluster.toml"
    path.write_text(textwrap.dedent(text))
    return path


def load_cluster_file(path):
    """Through the file source: it passes the launcher registry's names to the loader."""
    return resolve_cluster(str(path))


def test_good_file_loads(tmp_path):
    cluster = load_cluster_file(write(tmp_path, GOOD))
    assert cluster.name == "lab"
    assert cluster.launcher == "hostfile"
    assert [h.name for h in cluster.hosts] == ["node1", "node2"]
    assert cluster.host("node1").link_bps == 10**9  # the file's default link
    assert cluster.host("node2").link_bps == 10**8  # its own
    assert cluster.host("node2").cores == 4
    assert [s.name for s in cluster.sites] == ["tokyo", "tsukuba"]
    assert cluster.site("tsukuba") == Site("tsukuba", "hostfile", 10**8)
    assert cluster.wan_bps == 10**8


def test_unknown_host_is_a_clear_error(tmp_path):
    cluster = load_cluster_file(write(tmp_path, GOOD))
    with pytest.raises(UserError, match="no host 'node9'.*node1, node2"):
        cluster.host("node9")


@pytest.mark.parametrize(
    "text, bad_line, new_line, line, field, problem",
    [
        (GOOD, "cores = 4", 'cores = "four"', 23, "hosts[1].cores", "expected an integer"),
        (GOOD, "cores = 4", "core = 4", 23, "hosts[1].core", "unknown field"),
        (GOOD, 'link = "100mbit"', 'link = "100mb"', 25, "hosts[1].link", "bad link rate"),
        (GOOD, 'site = "tsukuba"', 'site = "osaka"', 24, "hosts[1].site", "unknown site 'osaka'"),
        (GOOD, 'name = "node2"', 'name = "node1"', 21, "hosts[1].name", "appears twice"),
        (GOOD, 'launcher = "hostfile"', 'launcher = "pbs"', 2, "launcher", "not one of"),
        (GOOD, 'launcher = "hostfile"', 'launcher = "vcluster"', 2, "launcher", "not one of"),
        (GOOD, 'mpi = ["openmpi", "mpich"]', 'mpi = ["lam"]', 3, "mpi", "not one of"),
        (
            GOOD,
            'wan_link = "100mbit"\n\n[[sites]]\nname = "tsukuba"',
            'wan_link = "100mbit"\n\n[[sites]]\nnaem = "tsukuba"',
            11,
            "sites[1].naem",
            "unknown",
        ),
        (
            MULTI,
            'launcher = "slurm"',
            'launcher = "pbs"',
            12,
            "sites[1].launcher",
            "'pbs' is not one of",
        ),
        (
            MULTI,
            'launcher = "slurm"',
            'launcher = "vcluster"',
            12,
            "sites[1].launcher",
            "not one of",
        ),
        (MULTI, 'launcher = "slurm"', "launcher = 7", 12, "sites[1].launcher", "7 is not one of"),
        (
            MULTI,
            'name = "tsukuba"\nlauncher',
            'name = "tokyo"\nlauncher',
            11,
            "sites[1].name",
            "appears twice",
        ),
        (
            MULTI,
            'wan_link = "10mbit"',
            'wan_link = "fast"',
            13,
            "sites[1].wan_link",
            "bad link rate",
        ),
    ],
)
def test_bad_field_names_file_line_and_field(
    tmp_path, text, bad_line, new_line, line, field, problem
):
    head, _, tail = text.rpartition(bad_line)  # the last: in GOOD, the second host's line
    path = write(tmp_path, head + new_line + tail)
    with pytest.raises(ConfigError) as info:
        load_cluster_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: {field}: "), message
    assert problem in message


def test_syntax_error_names_line(tmp_path):
    path = write(tmp_path, GOOD.replace("cores = 2", "cores = = 2"))
    with pytest.raises(ConfigError, match=rf"^{path}:17: syntax"):
        load_cluster_file(path)


def test_no_hosts(tmp_path):
    with pytest.raises(ConfigError, match="at least one host"):
        load_cluster_file(write(tmp_path, 'name = "x"\n'))


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="cannot read cluster file"):
        load_cluster_file(tmp_path / "absent.toml")


def test_sites_with_different_launchers(tmp_path):
    cluster = load_cluster_file(write(tmp_path, MULTI))
    assert cluster.site("tokyo") == Site("tokyo", "hostfile", None, {})
    assert cluster.site("tsukuba") == Site("tsukuba", "slurm", 10**7, {"partition": "debug"})
    assert [cluster.launcher_of(h.name) for h in cluster.hosts] == ["hostfile", "slurm", "slurm"]
    with pytest.raises(UserError, match="no site 'osaka'.*tokyo, tsukuba"):
        cluster.site("osaka")
    message = "different launchers \\(tokyo: hostfile, tsukuba: slurm\\)"
    with pytest.raises(UserError, match=message):
        cluster.launcher  # noqa: B018  (the property raises)
    with pytest.raises(UserError, match=message):
        launcher_for(cluster)


def test_launcher_for_one_site_sees_only_its_hosts(tmp_path):
    cluster = load_cluster_file(write(tmp_path, MULTI))
    tokyo, tsukuba = launcher_for(cluster, "tokyo"), launcher_for(cluster, "tsukuba")
    assert type(tokyo) is HostfileLauncher and type(tsukuba) is SlurmLauncher
    assert [h.name for h in tsukuba.cluster.hosts] == ["node2", "node3"]
    assert tsukuba.cluster.sites == (cluster.site("tsukuba"),)
    with pytest.raises(UserError, match="no site 'osaka'"):
        launcher_for(cluster, "osaka")


def test_file_without_sites_is_one_site_with_the_files_launcher(tmp_path):
    path = write(tmp_path, 'launcher = "slurm"\n[slurm]\npartition = "p"\n[[hosts]]\nname = "n1"\n')
    cluster = load_cluster_file(path)
    assert cluster.sites == (Site("site0", "slurm", None, {"partition": "p"}),)
    assert cluster.launcher == "slurm"
    assert cluster.host("n1").site == "site0"


def test_hosts_name_sites_freely_without_sites_tables(tmp_path):
    text = '[[hosts]]\nname = "a"\nsite = "east"\n[[hosts]]\nname = "b"\n'
    cluster = load_cluster_file(write(tmp_path, text))
    assert [(s.name, s.launcher) for s in cluster.sites] == [
        ("east", "hostfile"),
        ("site0", "hostfile"),
    ]
    assert [h.site for h in cluster.hosts] == ["east", "site0"]


def test_a_host_outside_every_site_is_a_bug():
    with pytest.raises(ValueError, match="host 'h' is in no site"):
        Cluster("c", (Host("h", site="east"),), (Site("west", "local"),))
