"""Embeddings from any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

Works with OpenAI itself and with local servers that copy its API (vLLM,
llama.cpp, Ollama, LM Studio, text-embeddings-inference). Standard library only:
no client object is created until a request is made, and nothing but the
configured endpoint is ever contacted. The API key is sent as a bearer token and
appears in no message, ``repr`` or log.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.embed.base import checked_texts, normalise_rows
from engram.errors import ConfigError, EmbeddingError, InvalidArgument

__all__ = ["OpenAIEmbedder"]

_PROBE_TEXT = "dimension probe"
_BODY_EXCERPT = 300
_STATUS_HINTS = {
    400: "check the model name and that the server serves embeddings",
    401: "check the API key (ENGRAM_OPENAI_API_KEY)",
    403: "check the API key's permissions",
    404: "check base_url (usually ending in /v1) and the model name",
    429: "the server is rate limiting; retry later or lower batch_size",
}


class OpenAIEmbedder:
    """Embedder backed by an OpenAI-compatible HTTP embeddings endpoint.

    Args:
        base_url: API root, e.g. ``"http://127.0.0.1:8000/v1"`` (http or https).
        model: model name sent in each request; ``model_id`` is ``"openai:" + model``.
        dimension: expected vector length; when None it is learned from the first
            answer (asking ``dimension`` first sends one short probe request).
        api_key: bearer token, if the server wants one.
        timeout: seconds to wait for each request.
        batch_size: most texts per request.

    Raises:
        ConfigError: ``base_url`` or ``model`` is unusable.
        InvalidArgument: ``dimension``, ``timeout`` or ``batch_size`` is out of range.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        dimension: int | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        batch_size: int = 128,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ConfigError("model must name the embedding model to request")
        _check_positive("dimension", dimension, allow_none=True)
        _check_positive("batch_size", batch_size)
        if not timeout > 0:
            raise InvalidArgument(f"timeout must be > 0 seconds, got {timeout!r}")
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._dimension = dimension
        self._api_key = api_key or None
        self._timeout = timeout
        self._batch_size = batch_size

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self._url!r}, model={self._model!r})"

    @property
    def model_id(self) -> str:
        """``"openai:" + model``."""
        return "openai:" + self._model

    @property
    def dimension(self) -> int:
        """Vector length; if not configured, learned with one probe request.

        Raises:
            EmbeddingError: the probe request failed.
        """
        if self._dimension is None:
            self._dimension = self._request([_PROBE_TEXT]).shape[1]
        return self._dimension

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` in requests of ``batch_size``; empty texts give zero rows.

        Empty strings are not sent (OpenAI rejects them).

        Raises:
            EmbeddingError: a request failed or the answer was malformed.
        """
        texts = checked_texts(texts)
        wanted = [row for row, text in enumerate(texts) if text]
        if not wanted:
            return np.zeros((len(texts), self.dimension), dtype=np.float32)
        parts = [
            self._request([texts[row] for row in wanted[start : start + self._batch_size]])
            for start in range(0, len(wanted), self._batch_size)
        ]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        out[wanted] = np.concatenate(parts)
        return out

    def _request(self, batch: Sequence[str]) -> NDArray[np.float32]:
        """Send one request; return its normalised vectors in input order."""
        body = json.dumps({"model": self._model, "input": list(batch)}).encode("utf-8")
        request = urllib.request.Request(
            self._url, data=body, headers=self._headers(), method="POST"
        )
        payload = _parse_json(self._send(request), self._url)
        vectors = _vectors_from(payload, len(batch))
        if self._dimension is not None and vectors.shape[1] != self._dimension:
            raise EmbeddingError(
                f"{self._url} returned {vectors.shape[1]}-dimensional vectors but dimension="
                f"{self._dimension} is configured; check the model name and the dimension setting"
            )
        self._dimension = vectors.shape[1]
        return normalise_rows(vectors)

    def _headers(self) -> dict[str, str]:
        """JSON headers, plus the bearer token when a key is configured."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "engram",
        }
        if self._api_key:
            headers["Authorization"] = "Bearer " + self._api_key
        return headers

    def _send(self, request: urllib.request.Request) -> bytes:
        """POST ``request`` and return the body; every failure becomes EmbeddingError."""
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as exc:
            raise EmbeddingError(self._http_message(exc)) from None
        except urllib.error.URLError as exc:
            raise EmbeddingError(
                f"cannot reach the embedding server at {self._url}: {exc.reason}; "
                "check base_url and that the server is running"
            ) from None
        except (TimeoutError, OSError) as exc:
            raise EmbeddingError(
                f"request to {self._url} failed: {exc or type(exc).__name__}; "
                f"check the server (timeout is {self._timeout} s)"
            ) from None

    def _http_message(self, error: urllib.error.HTTPError) -> str:
        """Describe an HTTP error status with a hint and an excerpt of the body."""
        try:
            excerpt = error.read(_BODY_EXCERPT).decode("utf-8", "replace")
        except OSError:
            excerpt = ""
        if self._api_key:
            excerpt = excerpt.replace(self._api_key, "***")
        hint = _STATUS_HINTS.get(error.code, "check the server's logs")
        return f"{self._url} answered HTTP {error.code}: {hint}; body: {excerpt.strip()!r}"


def _check_positive(name: str, value: int | None, *, allow_none: bool = False) -> None:
    """Raise InvalidArgument unless ``value`` is a positive int (or an allowed None)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")


def _parse_json(raw: bytes, url: str) -> Any:
    """Decode a JSON body, or explain that the endpoint is not speaking JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        raise EmbeddingError(
            f"{url} did not answer with JSON (starts {raw[:80]!r}); "
            "check that base_url points at an OpenAI-compatible API"
        ) from None


def _vectors_from(payload: Any, expected: int) -> NDArray[np.float64]:
    """Extract ``data[*].embedding`` ordered by ``index``; validate count and shape."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise EmbeddingError(
            "embedding answer has no 'data' list; check that the API is OpenAI-compatible"
        )
    if len(data) != expected:
        raise EmbeddingError(
            f"embedding answer has {len(data)} vectors for {expected} inputs; check the server"
        )
    try:
        ordered = sorted(data, key=lambda item: int(item["index"]))
        indices = [int(item["index"]) for item in ordered]
        matrix = np.array([item["embedding"] for item in ordered], dtype=np.float64)
    except (TypeError, KeyError, ValueError) as exc:
        raise EmbeddingError(
            f"malformed embedding answer ({exc}); float vectors with an 'index' were expected"
        ) from None
    if indices != list(range(expected)):
        raise EmbeddingError(
            f"embedding answer indices {indices[:8]}... do not cover 0..{expected - 1}"
        )
    if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
        raise EmbeddingError(
            "embedding answer vectors are empty, ragged or not finite; check the model"
        )
    return matrix
