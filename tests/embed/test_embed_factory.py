"""create_embedder and the import-time promises of engram.embed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from engram.embed import HashingEmbedder, LocalEmbedder, create_embedder, is_embedder
from engram.errors import ConfigError, InvalidArgument


class ThirdPartyEmbedder:
    """A caller's own embedder: meets the protocol without subclassing anything."""

    model_id = "third-party-v1"
    dimension = 4

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return np.full((len(texts), 4), 0.5, dtype=np.float32)


def test_builds_by_name_with_options() -> None:
    embedder = create_embedder("hashing", dimension=64)
    assert isinstance(embedder, HashingEmbedder)
    assert embedder.model_id == "hashing-v2-64"


def test_local_is_lazy() -> None:
    embedder = create_embedder("local", backend="numpy", batch_size=8)
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.active_backend is None
    assert (embedder.model_id, embedder.dimension) == ("all-MiniLM-L6-v2", 384)


def test_instances_pass_through() -> None:
    mine = ThirdPartyEmbedder()
    assert create_embedder(mine) is mine
    with pytest.raises(InvalidArgument):
        create_embedder(mine, dimension=3)


@pytest.mark.parametrize("spec", [None, 42, object(), b"hashing"])
def test_rejects_non_embedders(spec: object) -> None:
    assert not is_embedder(spec)
    with pytest.raises(InvalidArgument):
        create_embedder(spec)  # type: ignore[arg-type]


def test_unknown_name_and_unknown_option_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown embedder"):
        create_embedder("word2vec")
    with pytest.raises(ConfigError, match="bad option"):
        create_embedder("hashing", dimensions=64)


def test_import_loads_no_heavy_runtime() -> None:
    code = (
        "import sys, json, engram.embed;"
        "print(json.dumps([m for m in ('torch', 'onnxruntime', 'transformers',"
        " 'sentence_transformers', 'tokenizers') if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
