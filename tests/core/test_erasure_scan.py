"""The byte scan behind erasure receipts finds every window, on both of its paths."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engram.store import erasure


@pytest.mark.parametrize("count", [5, 300], ids=["find", "vectorised"])
def test_present_finds_exactly_the_windows_in_the_file(tmp_path: Path, count: int) -> None:
    rng = random.Random(count)
    data = bytearray(rng.randbytes(3 * (1 << 20)))
    wanted = [rng.randbytes(rng.randint(8, 32)) for _ in range(count)]
    planted = {wanted[0]: 0, wanted[-1]: len(data) - len(wanted[-1]), wanted[1]: 1_048_573}
    for window, at in planted.items():
        data[at : at + len(window)] = window
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(data))
    assert erasure.present(str(path), wanted) == set(planted)
    assert erasure.present(str(tmp_path / "missing"), wanted) == set()


def test_windows_skip_short_strings_and_cut_at_characters() -> None:
    found = erasure.windows(["03:00", "vim", "Zoë's très long note " * 4, None])
    assert (found.strings, found.short) == (1, 2)
    for window in found.windows:
        window.decode()  # whole characters only
        assert erasure.MIN_BYTES <= len(window) <= 32
