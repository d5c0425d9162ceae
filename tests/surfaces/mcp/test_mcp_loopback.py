"""``--no-auth`` is allowed only on loopback: which hosts count, parsed not prefix-matched."""

from __future__ import annotations

import pytest

from engram.surfaces.mcp.cli import is_loopback


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"])
def test_loopback_addresses_count(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0", "::", "10.0.0.1", "127.example.com", "127.0.0.1.nip.io", "localhost.evil", ""],
)
def test_names_and_other_addresses_do_not(host: str) -> None:
    assert not is_loopback(host)
