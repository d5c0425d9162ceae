"""What differs between the SQL dialects the stores speak, as one small value.

The scope predicate and the statement builders render their text through a
``Dialect``, so one module still writes every ownership condition and a second
backend does not need a copy of it. Only what really differs lives here: how a
bound parameter is spelled and how a fixed list of values is matched.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["POSTGRES", "SQLITE", "Dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """A SQL dialect: its name and its parameter style."""

    name: str
    named_style: str  # a format string with one ``{}`` for the parameter's name

    def param(self, name: str) -> str:
        """The placeholder for the named parameter ``name``."""
        return self.named_style.format(name)


SQLITE = Dialect("sqlite", ":{}")
POSTGRES = Dialect("postgresql", "%({})s")
