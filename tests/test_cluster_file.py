"""Cluster files: valid ones load, invalid ones name file, line and field."""

import textwrap

import pytest

from clustertune.cluster import load_cluster_file, local_cluster, resolve_cluster
from clustertune.errors import ConfigError, UserError

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


def write(tmp_path, text):
    path = tmp_path / "cluster.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_good_file_loads(tmp_path):
    cluster = load_cluster_file(write(tmp_path, GOOD))
    assert cluster.name == "lab"
    assert cluster.launcher == "hostfile"
    assert [h.name for h in cluster.hosts] == ["node1", "node2"]
    assert cluster.host("node1").link_bps == 10**9  # the file's default link
    assert cluster.host("node2").link_bps == 10**8  # its own
    assert cluster.host("node2").cores == 4
    assert cluster.sites == ["tokyo", "tsukuba"]
    assert cluster.wan_bps == 10**8


def test_resolve_by_path(tmp_path):
    assert resolve_cluster(str(write(tmp_path, GOOD))).name == "lab"


def test_resolve_default_is_this_host():
    cluster = resolve_cluster(None)
    assert cluster.launcher == "local"
    assert cluster == local_cluster()


def test_resolve_unknown_name_is_a_clear_error():
    with pytest.raises(UserError, match="no such cluster file and no virtual cluster"):
        resolve_cluster("nosuchcluster")


def test_unknown_host_is_a_clear_error(tmp_path):
    cluster = load_cluster_file(write(tmp_path, GOOD))
    with pytest.raises(UserError, match="no host 'node9'.*node1, node2"):
        cluster.host("node9")


@pytest.mark.parametrize(
    "bad_line, new_line, line, field, problem",
    [
        ('cores = 4', 'cores = "four"', 23, "hosts[1].cores", "positive integer"),
        ('cores = 4', 'core = 4', 23, "hosts[1].core", "unknown field"),
        ('link = "100mbit"', 'link = "100mb"', 25, "hosts[1].link", "bad link rate"),
        ('site = "tsukuba"', 'site = "osaka"', 24, "hosts[1].site", "unknown site 'osaka'"),
        ('name = "node2"', 'name = "node1"', 21, "hosts[1].name", "appears twice"),
        ('launcher = "hostfile"', 'launcher = "pbs"', 2, "launcher", "not one of"),
        ('mpi = ["openmpi", "mpich"]', 'mpi = ["lam"]', 3, "mpi", "not one of"),
        ('wan_link = "100mbit"\n\n[[sites]]\nname = "tsukuba"',
         'wan_link = "100mbit"\n\n[[sites]]\nnaem = "tsukuba"', 11, "sites[1].naem", "unknown"),
    ],
)  # fmt: skip
def test_bad_field_names_file_line_and_field(tmp_path, bad_line, new_line, line, field, problem):
    head, _, tail = GOOD.rpartition(bad_line)  # the last occurrence: the second host's line
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
