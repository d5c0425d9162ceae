"""What differs between the SQL dialects the stores speak, as one small value.

The scope predicate and the statement builders render their text through a
``Dialect``, so one module still writes every ownership condition and a second
backend does not need a copy of it. Only what really differs lives here: how a
bound parameter is spelled and how a fixed list of values is matched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["POSTGRES", "SQLITE", "Dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """A SQL dialect: its name, its parameter style and how a bound list is matched."""

    name: str
    named_style: str  # a format string with one ``{}`` for the parameter's name
    list_style: str  # ``{0}`` the expression, ``{1}`` the list's placeholder

    def param(self, name: str) -> str:
        """The placeholder for the named parameter ``name``."""
        return self.named_style.format(name)

    def member(self, expression: str, name: str) -> str:
        """``expression`` is one of the strings bound to ``name`` (``bound_list``)."""
        return self.list_style.format(expression, self.param(name))

    def bound_list(self, values: Sequence[str]) -> object:
        """How a list of strings is bound: a JSON array (SQLite), an array (PostgreSQL)."""
        return json.dumps(list(values)) if self.name == "sqlite" else list(values)


SQLITE = Dialect("sqlite", ":{}", "{0} IN (SELECT value FROM json_each({1}))")
POSTGRES = Dialect("postgresql", "%({})s", "{0} = ANY({1}::text[])")
