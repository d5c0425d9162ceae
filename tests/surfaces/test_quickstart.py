"""The quickstart shows a first-time user the request, what was chosen and why, and
what was left out and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engram.quickstart import REQUEST, run


def test_the_quickstart_explains_every_choice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(f"sqlite:///{tmp_path / 'quick.db'}", embedder="hashing")
    out = capsys.readouterr().out
    recall = out[out.index("== recall ==") :]
    assert f"request: {REQUEST!r}" in recall
    selected = recall[recall.index("selected") : recall.index("left out:")]
    left_out = recall[recall.index("left out:") : recall.index("== the memory block")]
    assert "Use Objective-C for iOS implementation." in selected
    assert "why: constraint in repo:lunest-ios" in selected
    assert " 0.00" not in selected  # score parts that are zero are hidden
    for memory in ("User prefers Python for data scripts.",
                   "User tested SwiftUI last month for a prototype screen.",
                   "Use Swift for iOS implementation."):  # fmt: skip
        assert memory in left_out
        assert left_out.split(memory, 1)[1].lstrip().startswith("why: ")
    assert "disputed" in left_out.split("Use Swift for iOS implementation.", 1)[1]
    assert "<engram_memory>" in out


def test_the_cli_is_reachable_with_help() -> None:
    done = subprocess.run([sys.executable, "-m", "engram.cli", "--help"], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0
    assert "quickstart" in done.stdout
