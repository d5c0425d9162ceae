"""A small agent graph with Engram as its store, on every backend: one node writes a
memory through ``store.put``, the next reads memories through ``store.search``, and a
later run (another thread, the same user) recalls what an earlier one stored. No
LLM: the nodes are plain functions, as a tool-calling node's store use would be."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from engram import Engram
from engram.surfaces.langgraph import EngramStore


@dataclass
class Caller:
    """The run's context: which user the graph works for."""

    user_id: str


class State(TypedDict, total=False):
    note: str
    question: str
    recalled: list[str]


def remember(state: State, runtime: Runtime[Caller]) -> State:
    """Store the note the run was given, if any, under the caller's namespace."""
    assert runtime.store is not None
    if state.get("note"):
        key = f"note-{len(runtime.store.search(('memories', runtime.context.user_id)))}"
        runtime.store.put(("memories", runtime.context.user_id), key, {"memory": state["note"]})
    return {}


def recall(state: State, runtime: Runtime[Caller]) -> State:
    """Read back what the caller's memories say about the question."""
    assert runtime.store is not None
    hits = runtime.store.search(("memories", runtime.context.user_id),
                                query=state["question"], limit=3)  # fmt: skip
    return {"recalled": [hit.value["memory"] for hit in hits]}


async def aremember(state: State, runtime: Runtime[Caller]) -> State:
    """``remember`` through the async store API."""
    assert runtime.store is not None
    if state.get("note"):
        await runtime.store.aput(("memories", runtime.context.user_id), "async-note",
                                 {"memory": state["note"]})  # fmt: skip
    return {}


async def arecall(state: State, runtime: Runtime[Caller]) -> State:
    """``recall`` through the async store API."""
    assert runtime.store is not None
    hits = await runtime.store.asearch(("memories", runtime.context.user_id),
                                       query=state["question"], limit=3)  # fmt: skip
    return {"recalled": [hit.value["memory"] for hit in hits]}


def _graph(
    store: EngramStore, asynchronous: bool = False
) -> CompiledStateGraph[State, Caller, State, State]:
    builder = StateGraph(State, context_schema=Caller)
    builder.add_node("remember", aremember if asynchronous else remember)
    builder.add_node("recall", arecall if asynchronous else recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def _store(mem: Engram) -> EngramStore:
    return EngramStore(mem, "acme", users={"alice", "bob"}, user_at=1)


def test_a_graph_writes_and_reads_memories_through_engram(mem: Engram) -> None:
    graph = _graph(_store(mem))
    first = graph.invoke({"note": "Alice prefers window seats on long flights",
                          "question": "which seat does Alice like on flights"},
                         context=Caller("alice"))  # fmt: skip
    assert first["recalled"] == ["Alice prefers window seats on long flights"]
    later = graph.invoke({"question": "what seat should I book for Alice's flight"},
                         context=Caller("alice"))  # fmt: skip
    assert "Alice prefers window seats on long flights" in later["recalled"]
    bob = graph.invoke({"question": "what seat should I book on the flight"},
                       context=Caller("bob"))  # fmt: skip
    assert bob["recalled"] == []
    stored = _store(mem).search(("memories", "alice"))
    assert [item.value for item in stored] == [
        {"memory": "Alice prefers window seats on long flights"}]  # fmt: skip


def test_an_async_graph_uses_the_async_store_api(mem: Engram) -> None:
    graph = _graph(_store(mem), asynchronous=True)
    result = asyncio.run(graph.ainvoke(
        {"note": "Bob is allergic to peanuts", "question": "does Bob have an allergy"},
        context=Caller("bob"),
    ))  # fmt: skip
    assert result["recalled"] == ["Bob is allergic to peanuts"]
    item = _store(mem).get(("memories", "bob"), "async-note")
    assert item is not None
    assert item.value == {"memory": "Bob is allergic to peanuts"}
