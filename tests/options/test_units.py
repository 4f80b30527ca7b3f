"""Durations and byte sizes with units (cebroker.options.units): what is accepted, what is
refused, and that what help texts print reads back as the same value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cebroker.options.units import format_duration, format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("600", 600.0),
        ("0", 0.0),
        ("2.5", 2.5),
        ("500ms", 0.5),
        ("10s", 10.0),
        ("5m", 300.0),
        ("24h", 86400.0),
        ("7d", 604800.0),
        ("1h30m", 5400.0),
        ("1d12h", 129600.0),
        ("1.5h", 5400.0),
        ("10M", 600.0),
        (" 10s ", 10.0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "-1", "-5s", "nan", "inf", "1e3", "10 minutes", "5x", "s", "1h 30m", "1_000", "0x10", ".5s"]
)
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("65536", 65536),
        ("0", 0),
        ("10B", 10),
        ("64KiB", 65536),
        ("1MiB", 1024**2),
        ("2GiB", 2 * 1024**3),
        ("1TiB", 1024**4),
        ("1kB", 1000),
        ("1KB", 1000),
        ("1MB", 1_000_000),
        ("1.5MB", 1_500_000),
        ("0.5KiB", 512),
        ("1 MiB", 1024**2),
        ("16mib", 16 * 1024**2),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "-5", "1k", "1M", "lots", "1e6", "10 MiBs", "MiB", "1_000"])
def test_not_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize("text", ["1.5", "1.5B", "0.1KiB"])
def test_fractions_of_a_byte_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="whole number of bytes"):
        parse_size(text)


@pytest.mark.parametrize(
    ("size", "text"), [(65536, "64KiB"), (1024**2, "1MiB"), (16 * 1024**2, "16MiB"), (1000, "1000"), (0, "0")]
)
def test_sizes_are_shown_in_the_largest_exact_unit(size: int, text: str) -> None:
    assert format_size(size) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(600.0, "10m"), (0.25, "250ms"), (90.0, "90s"), (86400.0, "1d"), (0.0, "0s")]
)
def test_durations_are_shown_in_the_largest_exact_unit(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=2**50))
def test_a_shown_size_reads_back(size: int) -> None:
    assert parse_size(format_size(size)) == size


@given(st.integers(min_value=0, max_value=10**9))
def test_a_shown_duration_reads_back(milliseconds: int) -> None:
    seconds = milliseconds / 1000
    assert parse_duration(format_duration(seconds)) == seconds
