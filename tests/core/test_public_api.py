"""The public surface is explicit, importable and documented."""

from __future__ import annotations

import inspect

import pytest

import engram

EXPECTED = [
    "Authority", "Budget", "Clock", "Config", "ConfigError", "Conflict", "Context",
    "EmbeddingError", "Engram", "EngramError", "Forbidden", "FrozenClock", "IncompleteIdentity",
    "IndexMismatch", "InvalidArgument", "MigrationError", "NotFound", "Operation", "PartialWrite",
    "Record", "Retention", "Scope", "Sensitivity", "Source", "SourceKind", "Status", "StoreError",
    "SystemClock", "Tier", "Turn", "TypePolicy", "Unavailable", "WorkingConfig", "WorkingItem",
    "WorkingMemory", "WriteResult",
]  # fmt: skip

SPEC_METHODS = ["open", "remember", "recall", "get", "list", "history", "correct", "retract",
                "forget", "erase_subject", "export", "import_records", "close",
                "working", "sweep"]  # fmt: skip


def test_all_is_the_expected_explicit_list() -> None:
    assert sorted(engram.__all__) == sorted(EXPECTED)
    assert len(set(engram.__all__)) == len(engram.__all__)


@pytest.mark.parametrize("name", EXPECTED)
def test_every_exported_name_is_importable_and_documented(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from engram import {name}", namespace)
    value = namespace[name]
    assert value is getattr(engram, name)
    assert inspect.getdoc(value), f"engram.{name} has no docstring"


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from engram import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(EXPECTED)


def _public_methods() -> list[str]:
    return [
        name
        for name, member in inspect.getmembers(engram.Engram)
        if not name.startswith("_")
        and (inspect.isfunction(member) or inspect.ismethod(member) or isinstance(member, property))
    ]


@pytest.mark.parametrize("name", _public_methods())
def test_every_public_method_of_engram_has_a_docstring(name: str) -> None:
    doc = inspect.getdoc(getattr(engram.Engram, name))
    assert doc, f"Engram.{name} has no docstring"
    assert len(doc.strip()) >= 15, f"Engram.{name} has a token docstring: {doc!r}"


def test_the_spec_methods_exist() -> None:
    assert set(SPEC_METHODS) <= set(_public_methods())
    assert isinstance(inspect.getattr_static(engram.Engram, "open"), classmethod)


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (engram.InvalidArgument, (engram.EngramError, ValueError)),
        (engram.IncompleteIdentity, (engram.InvalidArgument,)),
        (engram.ConfigError, (engram.InvalidArgument,)),
        (engram.NotFound, (engram.EngramError, LookupError)),
        (engram.Forbidden, (engram.EngramError, PermissionError)),
        (engram.StoreError, (engram.EngramError,)),
        (engram.MigrationError, (engram.StoreError,)),
        (engram.IndexMismatch, (engram.StoreError,)),
        (engram.EmbeddingError, (engram.EngramError,)),
    ],
)
def test_the_error_tree(error: type[Exception], bases: tuple[type[Exception], ...]) -> None:
    for base in bases:
        assert issubclass(error, base)
