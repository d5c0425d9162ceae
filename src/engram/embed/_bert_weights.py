"""BERT weights read straight from ``model.safetensors``, arranged for inference.

Shared by the numpy forward pass and the ONNX graph builder, so both see the same
numbers in the same layout: linear weights transposed to ``(in, out)`` for
``x @ w`` and the query/key/value projections fused into one matrix. The file is
parsed here (an 8-byte header length, a JSON header, raw little-endian data)
rather than through the ``safetensors`` package, which would pull in nothing but
this loop.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.errors import EmbeddingError

__all__ = ["BertConfig", "BertWeights", "LayerWeights", "read_safetensors"]

F32 = NDArray[np.float32]
_DTYPES: dict[str, type[np.generic]] = {
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
}


def read_safetensors(path: Path) -> dict[str, NDArray[np.generic]]:
    """Map every tensor in a ``.safetensors`` file to a read-only numpy array.

    The format is an 8-byte little-endian header length, a JSON header of
    ``name -> {dtype, shape, data_offsets}``, then the raw little-endian data.

    Raises:
        EmbeddingError: the file is missing, truncated or uses an unknown dtype.
    """
    try:
        blob = path.read_bytes()
        (header_len,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8 : 8 + header_len])
        return {
            name: _tensor(blob, 8 + header_len, name, spec)
            for name, spec in header.items()
            if name != "__metadata__"
        }
    except (OSError, struct.error, ValueError, KeyError, TypeError) as exc:
        raise EmbeddingError(f"cannot read model weights {path}: {exc}") from exc


def _tensor(blob: bytes, base: int, name: str, spec: dict[str, Any]) -> NDArray[np.generic]:
    """Return one tensor of a safetensors blob as a zero-copy view (float16 widened)."""
    dtype = _DTYPES.get(str(spec["dtype"]))
    if dtype is None:
        raise EmbeddingError(f"tensor {name} has unsupported dtype {spec['dtype']}")
    start, end = (int(offset) for offset in spec["data_offsets"])
    shape = tuple(int(size) for size in spec["shape"])
    little = np.dtype(dtype).newbyteorder("<")
    array = np.frombuffer(
        blob, dtype=little, count=(end - start) // little.itemsize, offset=base + start
    )
    array = array.reshape(shape)
    return array.astype(np.float32) if dtype is np.float16 else array


@dataclass(frozen=True, slots=True)
class BertConfig:
    """The few ``config.json`` fields the forward pass needs."""

    hidden_size: int
    num_heads: int
    num_layers: int
    layer_norm_eps: float

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        """Read a Hugging Face BERT ``config.json``; raises EmbeddingError if unusable."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("hidden_act", "gelu") != "gelu":
                raise ValueError(f"hidden_act {raw['hidden_act']!r} is not 'gelu'")
            return cls(
                int(raw["hidden_size"]),
                int(raw["num_attention_heads"]),
                int(raw["num_hidden_layers"]),
                float(raw.get("layer_norm_eps", 1e-12)),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"cannot use model config {path}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """One encoder layer's weights, pre-transposed to ``(in, out)`` for ``x @ w``."""

    qkv_w: F32
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1_g: F32
    ln1_b: F32
    up_w: F32
    up_b: F32
    down_w: F32
    down_b: F32
    ln2_g: F32
    ln2_b: F32


def _owned(tensors: dict[str, NDArray[np.generic]], name: str) -> F32:
    """Copy one tensor out of the file buffer as float32, so the buffer can be freed."""
    return np.array(tensors[name], dtype=np.float32)


def _load_layer(tensors: dict[str, NDArray[np.generic]], index: int) -> LayerWeights:
    """Gather layer ``index``'s weights; Q, K and V fused into one matrix."""

    def get(name: str) -> F32:
        return _owned(tensors, f"encoder.layer.{index}.{name}")

    def linear_t(name: str) -> F32:
        return np.ascontiguousarray(get(name + ".weight").T)

    qkv = [f"attention.self.{part}" for part in ("query", "key", "value")]
    return LayerWeights(
        qkv_w=np.ascontiguousarray(np.concatenate([get(p + ".weight") for p in qkv]).T),
        qkv_b=np.concatenate([get(p + ".bias") for p in qkv]),
        out_w=linear_t("attention.output.dense"),
        out_b=get("attention.output.dense.bias"),
        ln1_g=get("attention.output.LayerNorm.weight"),
        ln1_b=get("attention.output.LayerNorm.bias"),
        up_w=linear_t("intermediate.dense"),
        up_b=get("intermediate.dense.bias"),
        down_w=linear_t("output.dense"),
        down_b=get("output.dense.bias"),
        ln2_g=get("output.LayerNorm.weight"),
        ln2_b=get("output.LayerNorm.bias"),
    )


@dataclass(frozen=True, slots=True)
class BertWeights:
    """Everything an inference pass needs: config, embeddings and encoder layers."""

    config: BertConfig
    word: F32
    position: F32
    token_type: F32
    ln_g: F32
    ln_b: F32
    layers: tuple[LayerWeights, ...]

    @classmethod
    def from_directory(cls, directory: Path) -> BertWeights:
        """Load ``config.json`` and ``model.safetensors`` from a model directory.

        Tensor names are those of ``transformers.BertModel`` (a ``bert.`` prefix is
        accepted).

        Raises:
            EmbeddingError: a file is unreadable, a tensor missing or mis-sized.
        """
        config = BertConfig.from_file(directory / "config.json")
        raw = read_safetensors(directory / "model.safetensors")
        tensors = {name.removeprefix("bert."): value for name, value in raw.items()}
        try:
            weights = cls(
                config,
                word=_owned(tensors, "embeddings.word_embeddings.weight"),
                position=_owned(tensors, "embeddings.position_embeddings.weight"),
                token_type=_owned(tensors, "embeddings.token_type_embeddings.weight"),
                ln_g=_owned(tensors, "embeddings.LayerNorm.weight"),
                ln_b=_owned(tensors, "embeddings.LayerNorm.bias"),
                layers=tuple(_load_layer(tensors, i) for i in range(config.num_layers)),
            )
        except KeyError as exc:
            raise EmbeddingError(f"model weights lack tensor {exc}; is this a BERT model?") from exc
        if weights.word.shape[1] != config.hidden_size:
            raise EmbeddingError("model weights do not match config.json hidden_size")
        return weights
