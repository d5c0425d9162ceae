"""The optional heavyweight runtimes behind ``LocalEmbedder``: ONNX Runtime and torch.

Everything here imports its runtime inside a function, so importing
``engram.embed`` never loads torch or onnxruntime. The Hugging Face "offline"
switches are set only on the paths that import transformers, right before they do,
so that a missing file fails fast instead of reaching for the network.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.embed._onnx_graph import OPSET
from engram.errors import EmbeddingError

__all__ = [
    "default_cache_dir",
    "export_onnx",
    "load_onnx_forward",
    "load_torch_encoder",
]

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

#: ``(input_ids, attention_mask) -> last hidden state (batch, tokens, hidden)``.
Forward = Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float32]]
#: ``(texts, batch_size) -> L2-normalised sentence vectors``.
TextEncoder = Callable[[Sequence[str], int], NDArray[np.float32]]


def default_cache_dir() -> Path:
    """Return ``$XDG_CACHE_HOME/engram`` (``~/.cache/engram`` when unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "engram"


def _go_offline() -> None:
    """Forbid Hugging Face libraries from downloading anything in this process."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def export_onnx(dest: Path, source: Path) -> Path:
    """Export the BERT model in directory ``source`` to ONNX at ``dest``.

    Legacy (TorchScript) exporter, opset 17, dynamic batch and token axes. The
    graph outputs the last hidden state; pooling happens in numpy so that every
    backend pools the same way. Written to a temporary file and renamed, so a
    crash never leaves a half-written model behind.

    Raises:
        EmbeddingError: torch/transformers are missing or the export failed.
    """
    _go_offline()
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise EmbeddingError(
            f"exporting to ONNX needs torch and transformers ({exc}); "
            "pip install torch==2.13.0 transformers, or use backend='numpy'"
        ) from exc
    try:
        model = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()
    except Exception as exc:  # transformers raises many unrelated types here
        raise EmbeddingError(f"transformers could not load {source}: {exc}") from exc
    tmp_name = _temporary_beside(dest)
    try:
        _run_export(torch, model, Path(tmp_name))
        os.replace(tmp_name, dest)
    except Exception as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise EmbeddingError(f"ONNX export of {source} failed: {exc}") from exc
    return dest


def _temporary_beside(dest: Path) -> str:
    """Create an empty temporary file in ``dest``'s folder (made if missing)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(suffix=".onnx.tmp", dir=dest.parent)
    except OSError as exc:
        raise EmbeddingError(
            f"cannot write the ONNX cache in {dest.parent}: {exc}; pass onnx_path"
        ) from exc
    os.close(handle)
    return name


def _run_export(torch: Any, model: Any, target: Path) -> None:
    """Trace ``model`` with dynamic batch and sequence axes into ``target``.

    A wrapper pins the three inputs by keyword: ``BertModel.forward``'s positional
    order differs between transformers releases.
    """

    class _Wrapper(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.int64)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    with torch.no_grad():
        torch.onnx.export(
            _Wrapper().eval(),
            (sample, sample, torch.zeros_like(sample)),
            str(target),
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
            do_constant_folding=True,
        )


def load_onnx_forward(model: Path | bytes, threads: int) -> Forward:
    """Open an ONNX model (file or serialised bytes) with ``threads`` intra-op threads.

    Raises:
        EmbeddingError: onnxruntime is missing or the file cannot be loaded.
    """
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise EmbeddingError("backend 'onnx' needs onnxruntime: pip install onnxruntime") from exc
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    where = "the built graph" if isinstance(model, bytes) else str(model)
    source = model if isinstance(model, bytes) else str(model)
    try:
        session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped exception classes
        raise EmbeddingError(f"onnxruntime cannot load {where}: {exc}") from None
    wants_types = "token_type_ids" in {node.name for node in session.get_inputs()}

    def forward(
        input_ids: NDArray[np.int64], attention_mask: NDArray[np.int64]
    ) -> NDArray[np.float32]:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        if wants_types:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        try:
            return np.asarray(session.run(["last_hidden_state"], feed)[0], dtype=np.float32)
        except Exception as exc:  # onnxruntime's own exception classes
            raise EmbeddingError(f"onnxruntime failed on {where}: {exc}") from exc

    return forward


def load_torch_encoder(model_dir: Path, threads: int, max_tokens: int) -> TextEncoder:
    """Load the model with sentence-transformers on CPU, torch limited to ``threads``.

    Raises:
        EmbeddingError: torch or sentence-transformers is missing or loading failed.
    """
    _go_offline()
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingError(
            f"backend 'torch' needs torch and sentence-transformers ({exc}); "
            "pip install torch==2.13.0 sentence-transformers"
        ) from exc
    torch.set_num_threads(threads)
    try:
        model = SentenceTransformer(str(model_dir), device="cpu")
    except Exception as exc:  # sentence-transformers wraps many library errors
        raise EmbeddingError(f"sentence-transformers could not load {model_dir}: {exc}") from exc
    model.max_seq_length = max_tokens

    def encode(texts: Sequence[str], batch_size: int) -> NDArray[np.float32]:
        try:
            vectors = model.encode(
                list(texts),
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except Exception as exc:  # torch raises RuntimeError and friends
            raise EmbeddingError(f"sentence-transformers failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32)

    return encode
