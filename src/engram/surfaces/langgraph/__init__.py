"""A LangGraph ``BaseStore`` backed by Engram (the ``langgraph`` extra).

    from engram import Engram
    from engram.surfaces.langgraph import EngramStore

    memory = Engram.open("sqlite:///engram.db")
    store = EngramStore(memory, "acme", users={"alice", "bob"}, user_at=1)
    graph = builder.compile(store=store)  # nodes: store.put(("memories", "alice"), ...)

Namespaces map to the store's tenant, one of its users and a scope
(``namespaces``); items to keyed, versioned, governed memories (``items``,
``writes``); reads run under each user's Engram context (``reads``). See
docs/langgraph.md.
"""

from engram.surfaces.langgraph.namespaces import InvalidNamespace
from engram.surfaces.langgraph.store import EngramStore

__all__ = ["EngramStore", "InvalidNamespace"]
