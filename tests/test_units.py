import pytest

from clustertune.errors import UserError
from clustertune.units import format_rate, parse_rate, parse_size, parse_size_list


@pytest.mark.parametrize(
    "text, bits",
    [
        ("100mbit", 100_000_000),
        ("1gbit", 1_000_000_000),
        ("1Gbit", 1_000_000_000),
        ("10gbit", 10_000_000_000),
        ("2.5gbit", 2_500_000_000),
        ("10mbit/s", 10_000_000),
        ("64kbit", 64_000),
        ("unlimited", None),
    ],
)
def test_parse_rate(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text", ["100", "fast", "100mb", "-1gbit", "1 gigabit", "", "1kbit"])
def test_parse_rate_rejects(text):
    with pytest.raises(UserError, match="rate"):
        parse_rate(text)


@pytest.mark.parametrize("bits", [None, 10**8, 10**9, 64_000, 2_500_000_000])
def test_format_rate_round_trips(bits):
    assert parse_rate(format_rate(bits)) == bits


@pytest.mark.parametrize(
    "text, size", [("1", 1), ("4K", 4096), ("64k", 65536), ("8M", 8 << 20), ("1GiB", 1 << 30)]
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "K", "-4K", "4T", "1.5M", "four"])
def test_parse_size_rejects(text):
    with pytest.raises(UserError, match="size"):
        parse_size(text)


def test_parse_size_list():
    assert parse_size_list("4K,8K,256K") == [4096, 8192, 262144]
    with pytest.raises(UserError):
        parse_size_list(",")
