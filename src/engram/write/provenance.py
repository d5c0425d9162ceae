"""Authority follows provenance: what a memory's source kind lets it claim.

A memory's authority decides conflicts before recency (``decide``), so it must
not be free for the asking. Text that came from a document, a tool or another
user's share is not the user's own statement: by default it carries the
authority its source kind earns, and a caller may lower that but never raise it
above the kind's cap (ranks of ``decide.AUTHORITY_RANK``).

| source kind   | default          | at most           |
|---------------|------------------|-------------------|
| conversation  | explicit_user    | explicit_user (explicit_admin via remember_global) |
| import        | explicit_user    | explicit_user     |
| tool          | tool_observation | tool_observation  |
| document      | tool_observation | tool_observation  |
| share         | shared           | shared            |
| consolidation | derived_summary  | derived_summary   |
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from engram.errors import InvalidArgument
from engram.types import Authority, SourceKind, parse_enum
from engram.write.decide import AUTHORITY_RANK

__all__ = ["AUTHORITY_CAP", "DEFAULT_AUTHORITY", "authority_for", "capped_authority"]

_A, _K = Authority, SourceKind
DEFAULT_AUTHORITY: Mapping[SourceKind, Authority] = MappingProxyType({
    _K.CONVERSATION: _A.EXPLICIT_USER, _K.IMPORT: _A.EXPLICIT_USER,
    _K.TOOL: _A.TOOL_OBSERVATION, _K.DOCUMENT: _A.TOOL_OBSERVATION,
    _K.SHARE: _A.SHARED, _K.CONSOLIDATION: _A.DERIVED_SUMMARY,
})  # fmt: skip
# explicit_admin ranks with explicit_user; whether a call may use it is the facade's rule.
AUTHORITY_CAP: Mapping[SourceKind, Authority] = MappingProxyType({
    _K.CONVERSATION: _A.EXPLICIT_ADMIN, _K.IMPORT: _A.EXPLICIT_USER,
    _K.TOOL: _A.TOOL_OBSERVATION, _K.DOCUMENT: _A.TOOL_OBSERVATION,
    _K.SHARE: _A.SHARED, _K.CONSOLIDATION: _A.DERIVED_SUMMARY,
})  # fmt: skip


def authority_for(kind: SourceKind, claimed: object) -> Authority:
    """The authority a write from ``kind`` carries: the kind's default when
    ``claimed`` is None, else ``claimed`` if the kind allows it, else ``InvalidArgument``."""
    if claimed is None:
        return DEFAULT_AUTHORITY[kind]
    authority = parse_enum(Authority, claimed, "authority")
    cap = AUTHORITY_CAP[kind]
    if AUTHORITY_RANK[authority] > AUTHORITY_RANK[cap]:
        raise InvalidArgument(
            f"a {kind.value} source can carry at most {cap.value} authority, not "
            f"{authority.value}: only the user's own statement (source kind conversation) is "
            "explicit_user"
        )
    return authority


def capped_authority(kind: SourceKind, claimed: Authority) -> Authority:
    """``claimed`` lowered to what ``kind`` may carry (for rows exported before the cap)."""
    cap = AUTHORITY_CAP[kind]
    return cap if AUTHORITY_RANK[claimed] > AUTHORITY_RANK[cap] else claimed
