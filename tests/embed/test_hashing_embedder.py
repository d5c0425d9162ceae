"""HashingEmbedder: the deterministic test embedder every other suite relies on."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.embed import Embedder, HashingEmbedder, is_embedder
from engram.errors import InvalidArgument

TEXTS = ["The cat sits on the mat", "A cat is sitting on a mat", "Quarterly revenue grew 5%"]


def test_shape_dtype_and_unit_rows() -> None:
    vectors = HashingEmbedder(dimension=64).embed(TEXTS)
    assert vectors.shape == (3, 64)
    assert vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


def test_empty_batch_and_empty_texts() -> None:
    embedder = HashingEmbedder()
    assert embedder.embed([]).shape == (0, 384)
    vectors = embedder.embed(["", "  ?! ", "word"])
    assert not vectors[:2].any()
    assert np.linalg.norm(vectors[2]) == pytest.approx(1.0)


def test_shared_words_score_higher_than_unrelated_text() -> None:
    cat, sitting_cat, revenue = HashingEmbedder().embed(TEXTS)
    assert float(cat @ sitting_cat) > float(cat @ revenue) + 0.2


def test_inflections_overlap_through_char_trigrams() -> None:
    sits, sitting, unrelated = HashingEmbedder().embed(["sits", "sitting", "revenue"])
    assert float(sits @ sitting) > float(sits @ unrelated)


def test_case_and_spacing_do_not_matter() -> None:
    first, second = HashingEmbedder().embed(["Hello   WORLD", "hello world"])
    np.testing.assert_allclose(first, second, atol=1e-7)


def test_same_vectors_in_another_process_with_another_hash_seed() -> None:
    code = (
        "from engram.embed import HashingEmbedder;"
        "print(HashingEmbedder(32).embed(['determinism across runs']).tobytes().hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    here = HashingEmbedder(32).embed(["determinism across runs"]).tobytes().hex()
    assert done.stdout.strip() == here


def test_model_id_names_version_and_dimension() -> None:
    assert HashingEmbedder(dimension=128).model_id == "hashing-v2-128"
    assert HashingEmbedder().dimension == 384


@pytest.mark.parametrize("dimension", [0, 8, -1, True, 38.4, "384"])
def test_rejects_bad_dimension(dimension: object) -> None:
    with pytest.raises(InvalidArgument):
        HashingEmbedder(dimension=dimension)  # type: ignore[arg-type]


@pytest.mark.parametrize("texts", ["a bare string", ["fine", 3], [None]])
def test_rejects_a_bare_string_and_non_strings(texts: object) -> None:
    with pytest.raises(InvalidArgument):
        HashingEmbedder().embed(texts)  # type: ignore[arg-type]


def test_meets_the_embedder_protocol() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    assert is_embedder(embedder)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=6))
def test_rows_are_unit_or_zero_and_deterministic(texts: list[str]) -> None:
    embedder = HashingEmbedder(dimension=32)
    vectors = embedder.embed(texts)
    assert vectors.shape == (len(texts), 32)
    norms = np.linalg.norm(vectors, axis=1)
    assert np.all((np.abs(norms - 1.0) < 1e-5) | (norms == 0.0))
    np.testing.assert_array_equal(vectors, embedder.embed(texts))
