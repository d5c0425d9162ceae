"""A BERT encoder forward pass in plain numpy.

Why: with nothing but ``tokenizers`` installed (no runtime, no export, no torch)
it reproduces sentence-transformers to 1e-6. It is the fallback backend: on 2
cores it is about 1.4x slower than ONNX Runtime on batches and up to 2x on one
query, because OpenBLAS repacks each weight matrix on every small product while
ONNX Runtime packs them once. Inference only: no dropout, absolute positions,
post-layer normalisation, exact (erf) GELU, as in ``transformers.BertModel``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engram.embed._bert_weights import BertWeights, LayerWeights
from engram.errors import EmbeddingError

__all__ = ["NumpyBert", "gelu"]

F32 = NDArray[np.float32]
_GELU_BLOCK = 16384  # values per GELU step: three 64 KB scratch rows stay in L2
# Abramowitz & Stegun 7.1.26: |erf error| < 1.5e-7, below float32 resolution.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(
    np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
)


def gelu(x: F32) -> F32:
    """Exact GELU, ``x * Phi(x)``, computed in place on ``x`` (C-contiguous).

    erf comes from A&S 7.1.26 (numpy has none). The ~17 elementwise steps run on
    blocks of ``_GELU_BLOCK`` values so they stay in cache: 4x faster than whole-array
    passes over a (tokens, 1536) activation.
    """
    flat = x.reshape(-1)
    scratch = np.empty((3, min(_GELU_BLOCK, flat.size)), dtype=np.float32)
    for start in range(0, flat.size, _GELU_BLOCK):
        chunk = flat[start : start + _GELU_BLOCK]
        _gelu_block(chunk, *scratch[:, : chunk.size])
    return x


def _gelu_block(x: F32, z: F32, t: F32, erf: F32) -> None:
    """GELU of one block in place, using three scratch buffers of its size."""
    np.abs(x, out=z)
    z *= np.float32(0.7071067811865476)  # |x| / sqrt(2)
    np.multiply(z, _ERF_P, out=t)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    erf.fill(_ERF_A[0])
    for coefficient in _ERF_A[1:]:
        erf *= t
        erf += coefficient
    erf *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    erf *= z  # now erfc(|x| / sqrt 2)
    np.subtract(np.float32(1.0), erf, out=erf)
    np.copysign(erf, x, out=erf)  # erf(x / sqrt 2)
    erf += np.float32(1.0)
    x *= erf
    x *= np.float32(0.5)


def _dense(x: F32, weight: F32, bias: F32, residual: F32 | None = None) -> F32:
    """``x @ weight + bias (+ residual)``, adding in place to save temporaries."""
    out = x @ weight
    out += bias
    if residual is not None:
        out += residual
    return out


def _layer_norm(x: F32, gamma: F32, beta: F32, eps: float) -> F32:
    """Normalise the last axis to zero mean and unit variance, then scale and shift."""
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = np.mean(centred * centred, axis=-1, keepdims=True)
    centred *= 1.0 / np.sqrt(variance + np.float32(eps))
    centred *= gamma
    centred += beta
    return np.asarray(centred, dtype=np.float32)


class NumpyBert:
    """BERT encoder returning the last hidden state for padded token batches."""

    def __init__(self, weights: BertWeights) -> None:
        self.weights = weights
        self.config = weights.config

    def __call__(self, input_ids: NDArray[np.int64], attention_mask: NDArray[np.int64]) -> F32:
        """Return hidden states ``(batch, tokens, hidden)`` for right-padded inputs."""
        batch, length = input_ids.shape
        w = self.weights
        if length > w.position.shape[0]:
            raise EmbeddingError(f"{length} tokens exceed the model's {w.position.shape[0]}")
        x = w.word[input_ids] + w.position[:length] + w.token_type[0]
        x = _layer_norm(x.reshape(batch * length, -1), w.ln_g, w.ln_b, self.config.layer_norm_eps)
        # Additive mask: padded keys get -inf-like scores, shape (batch, 1, 1, keys).
        bias = ((1.0 - attention_mask.astype(np.float32)) * np.float32(-1e9))[:, None, None, :]
        for layer in w.layers:
            x = self._layer(x, layer, bias, batch, length)
        return x.reshape(batch, length, -1)

    def _layer(self, x: F32, w: LayerWeights, bias: F32, batch: int, length: int) -> F32:
        """Run one encoder layer over flattened tokens ``(batch * length, hidden)``."""
        eps = self.config.layer_norm_eps
        attended = self._attention(_dense(x, w.qkv_w, w.qkv_b), bias, batch, length)
        x = _layer_norm(_dense(attended, w.out_w, w.out_b, residual=x), w.ln1_g, w.ln1_b, eps)
        hidden = gelu(_dense(x, w.up_w, w.up_b))
        return _layer_norm(_dense(hidden, w.down_w, w.down_b, residual=x), w.ln2_g, w.ln2_b, eps)

    def _attention(self, qkv: F32, bias: F32, batch: int, length: int) -> F32:
        """Multi-head scaled dot-product attention; returns ``(batch * length, hidden)``."""
        heads = self.config.num_heads
        head_dim = self.config.hidden_size // heads
        # (batch, length, 3, heads, head_dim) -> (3, batch, heads, length, head_dim)
        q, k, v = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
        scores = (q * np.float32(1.0 / np.sqrt(head_dim))) @ k.transpose(0, 1, 3, 2)
        scores += bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = scores @ v  # (batch, heads, length, head_dim)
        merged = context.transpose(0, 2, 1, 3).reshape(batch * length, heads * head_dim)
        return np.asarray(merged, dtype=np.float32)
