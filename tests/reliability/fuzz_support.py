"""Isolation at scale: adversarial identities, a world of tenants written through the
SDK, and an oracle of who may see what, built from what was written (never read
back from the store).

The identities are chosen to break a careless scope check: ids that are prefixes
of others (``t``, ``t1``, ``t12``), that differ only in case or in Unicode form
(NFC and NFD ``café``, Cyrillic ``а`` for Latin ``a``, full-width letters), that
carry SQL (``' OR 1=1 --``), LIKE wildcards (``%``, ``_``) or full-text syntax
(``"``, ``*``, ``NEAR``, ``OR``, ``-``, ``:``), and ids at the validators' length
limit. Some are refused by the validators (``limits.identifier``, the ``:`` rule of
``scope.resolve``); ``World.rejected`` records which and why.

The leak detector (``Oracle.foreign``) does not trust the shape of an answer: it
serialises the whole answer (records, prompt, trace) and looks for every record
id and every content token of the world in it; one that the caller may not see
is a foreign record.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram import Context, Engram
from engram.errors import EngramError
from engram.scope import resolve

__all__ = [
    "AGENTS",
    "QUERIES",
    "TENANTS",
    "USERS",
    "Caller",
    "Oracle",
    "World",
    "Written",
    "build_world",
    "random_caller",
]

_LONG = "t" * 199
# Tenant ids: look-alikes and syntax. Every one the validators accept becomes a tenant.
TENANTS: tuple[str, ...] = (
    "acme", "acm", "acme2", "ACME", "Acme", "\u0430cme", "\uff41\uff43\uff4d\uff45",
    "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9"), "' OR 1=1 --", "x' OR 'a'='a",
    "Robert'); DROP TABLE records;--", "%", "_", "a%", "a_me", "%acme%", "ac_e", '"', '"acme"',
    "*", "acme*", "NEAR", "NEAR(acme globex)", "OR", "acme OR globex", "-acme", "acme:", "x:y",
    "content:acme", "fts_owner:acme", _LONG, _LONG + "t", "t", "t1", "t12", "t123", "\\",
    "a\\_b", "1", "0", "null", "None", "\ufb01le", "stra\u00dfe", "strasse", "\u0130stanbul",
    "istanbul", "\U0001f642", "a b", "{}", "$1", "%(tenant_id)s", "?", "globex", "globex ",
    " globex", "", "  ", ":acme", "acme\n", "ac\u200bme", "t" * 201, "ac\u202eme", "ac\x00me",
)  # fmt: skip
USERS: tuple[str, ...] = (
    "u1", "u", "u12", "U1", "\u04431", "\uff55\uff11", "u1%", "u_", "' OR ''='", '"u1"', "u1*",
    "NEAR", "-u1", "u1:x", "alice", "\u0430lice", "alice ", "u" * 200, "",
)  # fmt: skip
AGENTS: tuple[str | None, ...] = (
    None, "coder", "Coder", "c\u043eder", "coder%", "cod_r", "", "coder OR reviewer",
)  # fmt: skip
PROJECTS: tuple[str | None, ...] = (None, "p1", "p", "P1", "p1%", "p\u0131", "p1*")
# Recall queries: full-text syntax of SQLite FTS5 and PostgreSQL websearch_to_tsquery,
# SQL, and words every record's content draws from (so foreign records are tempting).
QUERIES: tuple[str, ...] = (
    '"', '""', '"falcon', "*", "falcon*", "NEAR(falcon gravel)", "falcon NEAR gravel",
    "falcon OR gravel OR harbour", "-falcon", "falcon -gravel", "content:falcon",
    "fts_owner:*", "{content fts_owner}: falcon", "' OR 1=1 --", "%", "_", "a%b",
    "falcon AND NOT gravel", "^falcon", "falcon:*", "(falcon", "falcon)", "!falcon", "&|",
    "\\", "\u0000", "falcon gravel harbour lantern", "what does the team prefer?",
)  # fmt: skip
WORDS: tuple[str, ...] = (
    "falcon", "gravel", "harbour", "lantern", "copper", "meadow", "violet", "engine", "orbit",
    "pepper", "quartz", "ribbon", "saddle", "timber", "umbrella", "velvet", "walnut", "yonder",
    "zephyr", "anchor", "bramble", "candle", "dagger", "ember", "fable", "garnet", "hollow",
    "island", "juniper", "kettle", "ledger", "marble", "nectar", "oyster", "pebble", "quiver",
)  # fmt: skip
_TOKEN = re.compile(r"fz[0-9a-f]{12}")
_ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


@dataclass(frozen=True, slots=True)
class Caller:
    """One identity (a ``Context``'s fields); ``tenant`` is also the REST key's tenant."""

    tenant: str
    user: str
    agent: str | None = None
    project: str | None = None

    def same_view(self, other: Caller) -> bool:
        """Whether both identities resolve to one visibility (a blank agent or project
        id is none at all, as ``scope.resolve`` has it)."""
        return (self.tenant, self.user, self.agent or None, self.project or None) == (
            other.tenant, other.user, other.agent or None, other.project or None)  # fmt: skip

    def context(self) -> Context:
        """The SDK context of this identity."""
        return Context(tenant_id=self.tenant, user_id=self.user, agent_id=self.agent,
                       project_id=self.project)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Written:
    """One acknowledged record: its id, content token and owner as written."""

    id: str
    token: str
    tenant: str
    user: str  # "" for a tenant-wide (global) record
    agent: str  # "" when bound to no agent
    scope: str


def accepted(caller: Caller) -> str | None:
    """Why the validators refuse ``caller`` (None: they accept it)."""
    try:
        resolve(caller.context())
    except EngramError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@dataclass
class Oracle:
    """Who may see which record, from what was written."""

    records: dict[str, Written] = field(default_factory=dict)
    by_token: dict[str, Written] = field(default_factory=dict)

    def add(self, written: Written) -> None:
        """Remember one acknowledged record."""
        self.records[written.id] = written
        self.by_token[written.token] = written

    def sees(self, caller: Caller, rec: Written) -> bool:
        """The visibility rule (docs/contract.md principle 1), written independently."""
        if rec.tenant != caller.tenant:
            return False
        if rec.scope == "global":
            return True
        named = {"user"} | ({f"project:{caller.project}"} if caller.project else set())
        agent_ok = rec.agent == "" or rec.agent == (caller.agent or "")
        return rec.user == caller.user and rec.scope in named and agent_ok

    def visible(self, caller: Caller) -> set[str]:
        """Ids of every record ``caller`` may see."""
        return {r.id for r in self.records.values() if self.sees(caller, r)}

    def foreign(self, caller: Caller, answer: Any, asked: str | None = None) -> list[Written]:
        """Records of the world named in ``answer`` (any JSON-able value or text, by
        id or by content token) that ``caller`` may not see. ``asked``, the id the
        request itself named, may be echoed (a 404 names what it did not find)."""
        text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
        if asked:
            text = text.replace(asked, "")
        found = [self.records.get(m) for m in _ULID.findall(text)]
        found += [self.by_token.get(m) for m in _TOKEN.findall(text)]
        return [rec for rec in found if rec is not None and not self.sees(caller, rec)]


@dataclass
class World:
    """The tenants written, the callers that wrote, the oracle and the refusals."""

    oracle: Oracle
    tenants: list[str]
    writers: list[Caller]
    rejected: dict[str, str]  # repr of a refused identity -> why


def _content(rng: random.Random) -> tuple[str, str]:
    token = f"fz{rng.getrandbits(48):012x}"
    return token, f"{token} {' '.join(rng.sample(WORDS, 6))}."


def _write_user(mem: Engram, rng: random.Random, caller: Caller, count: int) -> list[Written]:
    """``count`` records of one writer, in one ``remember_many``: scope ``user`` or the
    writer's project, bound to its agent or to none (``agent_scope`` explicit)."""
    items, owners = [], []
    for _ in range(count):
        token, text = _content(rng)
        scope = f"project:{caller.project}" if caller.project and rng.random() < 0.5 else "user"
        item: dict[str, Any] = {"content": text, "type": "fact", "scope": scope}
        agent = ""
        if caller.agent:  # a blank agent id is no agent (``scope.resolve``)
            bound = rng.random() < 0.5
            item["agent_scope"] = "agent" if bound else "user"
            agent = caller.agent if bound else ""
        items.append(item)
        owners.append((token, agent, scope))
    results = mem.remember_many(caller.context(), items)
    out = []
    for result, (token, agent, scope) in zip(results, owners, strict=True):
        assert result.operation.value == "ADD", result.reason
        assert result.record is not None
        out.append(Written(result.record.id, token, caller.tenant, caller.user, agent, scope))
    return out


def refusals() -> dict[str, str]:
    """Each pooled id the validators refuse, as ``field 'id'``, and why."""
    probes = [("tenant_id", Caller(t, "u1")) for t in TENANTS]
    probes += [("user_id", Caller("acme", u)) for u in USERS]
    probes += [("agent_id", Caller("acme", "u1", a)) for a in AGENTS if a is not None]
    probes += [("project_id", Caller("acme", "u1", None, p)) for p in PROJECTS if p is not None]
    found = {}
    for name, caller in probes:
        why = accepted(caller)
        if why is not None:
            value = getattr(caller, name.removesuffix("_id"))
            found[f"{name} {value!r}"] = why
    return found


def build_world(mem: Engram, seed: int, tenants: int = len(TENANTS), users: int = 3,
                per_user: int = 2) -> World:  # fmt: skip
    """Write the world through ``mem``: up to ``tenants`` of the accepted tenant ids,
    each with ``users`` writers (random user, agent and project ids from the pools;
    a refused one writes nothing) of ``per_user`` records and one tenant-wide record."""
    rng = random.Random(seed)
    oracle = Oracle()
    names = [t for t in TENANTS if accepted(Caller(t, "u1")) is None][:tenants]
    writers: list[Caller] = []
    for tenant in names:
        for _ in range(users):
            caller = _pick(rng, tenant)
            if accepted(caller) is None:
                writers.append(caller)
                for rec in _write_user(mem, rng, caller, per_user):
                    oracle.add(rec)
        token, text = _content(rng)
        result = mem.remember_global(tenant, text, type="fact")
        assert result.record is not None, result.reason
        oracle.add(Written(result.record.id, token, tenant, "", "", "global"))
    return World(oracle, names, writers, refusals())


def _pick(rng: random.Random, tenant: str) -> Caller:
    return Caller(tenant, rng.choice(USERS), rng.choice(AGENTS), rng.choice(PROJECTS))


def random_caller(rng: random.Random, world: World) -> Caller:
    """A reader: half the time a writer as it wrote, else a writer with one field
    swapped for another id from the pools (a look-alike, a prefix, syntax)."""
    base = rng.choice(world.writers)
    if rng.random() < 0.5:
        return base
    field_name = rng.choice(("tenant", "user", "agent", "project"))
    if field_name == "tenant":
        return Caller(rng.choice(world.tenants), base.user, base.agent, base.project)
    if field_name == "user":
        return Caller(base.tenant, rng.choice(USERS), base.agent, base.project)
    if field_name == "agent":
        return Caller(base.tenant, base.user, rng.choice(AGENTS), base.project)
    return Caller(base.tenant, base.user, base.agent, rng.choice(PROJECTS))


def candidate_ids(rng: random.Random, world: World, caller: Caller,
                  visible: Sequence[str]) -> str:  # fmt: skip
    """An id to ask for: a visible one half the time, else any record of the world."""
    if visible and rng.random() < 0.5:
        return rng.choice(list(visible))
    return rng.choice(list(world.oracle.records))


def tally(values: Iterable[str]) -> dict[str, int]:
    """Counts of each value, sorted by name (for a results file)."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))
