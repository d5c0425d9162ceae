"""``Principal``: the reach rules every network surface shares (REST, MCP over HTTP, the
dashboard through REST), and the MCP identity built on them."""

from __future__ import annotations

import pytest

from engram.errors import Forbidden, IncompleteIdentity
from engram.surfaces.principal import Principal

ANY = Principal("acme", "k0")
USERS = Principal("acme", "k1", users=frozenset({"u1"}))
AGENTS = Principal("acme", "k2", agents=frozenset({"coder", "reviewer"}))
ONE_AGENT = Principal("acme", "k3", users=frozenset({"u1"}), agents=frozenset({"coder"}))
ADMIN = Principal("acme", "k4", admin=True)
LIMITED_ADMIN = Principal("acme", "k5", admin=True, agents=frozenset({"coder"}))


def test_an_unlimited_key_acts_for_anyone_of_its_tenant() -> None:
    ANY.allows("u1")
    ANY.allows("u2", "coder")
    ANY.allows(None)  # a missing user is the SDK's to report


def test_a_user_limited_key_acts_for_its_users_only() -> None:
    USERS.allows("u1", "anyone")
    with pytest.raises(Forbidden, match="may not act for user 'u2'"):
        USERS.allows("u2")


def test_an_agent_limited_key_must_name_one_of_its_agents() -> None:
    AGENTS.allows("u9", "reviewer")
    with pytest.raises(Forbidden, match="may not act for agent 'tester'"):
        AGENTS.allows("u9", "tester")
    with pytest.raises(Forbidden, match=r"acts only for agents \['coder', 'reviewer'\]"):
        AGENTS.allows("u9")  # the user's agent-less view is not the key's
    with pytest.raises(Forbidden, match="acts only for agents"):
        LIMITED_ADMIN.allows("u1")  # an admin key limited to agents too (erasing a user)


def test_tenant_wide_changes_need_an_unlimited_admin() -> None:
    ADMIN.require_whole_tenant("granting")
    for key in (ANY, USERS):
        with pytest.raises(Forbidden, match="needs an admin key"):
            key.require_whole_tenant("granting")
    with pytest.raises(Forbidden, match="limited to some of them"):
        LIMITED_ADMIN.require_whole_tenant("granting")


def test_mcp_over_http_applies_the_same_rules_and_defaults_a_keys_only_agent() -> None:
    from engram.surfaces.mcp.identity import context_for  # plain Python: no SDK needed

    ctx = context_for(ONE_AGENT, {})
    assert (ctx.tenant_id, ctx.user_id, ctx.agent_id) == ("acme", "u1", "coder")
    with pytest.raises(Forbidden, match="acts only for agents"):
        context_for(AGENTS, {"engram-user": "u1"})  # two agents: the client must choose
    assert context_for(AGENTS, {"engram-user": "u1", "engram-agent": "coder"}).agent_id == "coder"
    with pytest.raises(Forbidden, match="may not act for agent"):
        context_for(ONE_AGENT, {"engram-agent": "reviewer"})
    with pytest.raises(IncompleteIdentity):
        context_for(AGENTS, {})
