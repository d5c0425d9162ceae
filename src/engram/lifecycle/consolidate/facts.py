"""Facts: what an episode states goes through the proposer, then the write policy.

Each episode is one ``Turn`` for the proposer (by default the deterministic
``RuleProposer``): a ``user`` turn when the episode carries ``explicit_user``
authority (the user's own words), an ``assistant`` turn otherwise, so a fact is
``explicit_user`` only when the user said it and the agent's own text yields at
most ``model_inference``. Episodes are proposed one at a time, so every fact
names its episode: ``source`` kind ``conversation``, the episode's ``ref``,
``derived_from`` the episode (forgetting the episode forgets the fact), and it
keeps the episode's scope, time and governance (sensitivity, purpose, consent
basis, private). Turns that open with a speaker's name ("Melanie: ...", a
transcript of several people) state nothing about the user to the rule
proposer, which reads sentences from their start.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from engram import limits
from engram.config import Config
from engram.errors import InvalidArgument
from engram.lifecycle.consolidate.grouping import Group
from engram.types import Authority, Proposal, Record, Sensitivity, Source, Turn
from engram.write.batch import proposal_item
from engram.write.ownership import owning_agent
from engram.write.passages import Unit, expand
from engram.write.proposal import build_proposal, proposal_fields
from engram.write.propose import Proposer

__all__ = ["FactItem", "fact_items"]

_RANK = {Sensitivity.LOW: 0, Sensitivity.MEDIUM: 1, Sensitivity.HIGH: 2}

FactItem = tuple[str | None, Unit]  # the agent it belongs to (None: the user's), the unit


def _turn(episode: Record) -> Turn:
    role = "user" if episode.authority == Authority.EXPLICIT_USER else "assistant"
    content = limits.nul_as_space(episode.content)  # an episode stored before NUL was refused
    return Turn(role, content, episode.observed_at, episode.source.ref)


def _checked(config: Config, proposal: Proposal) -> Proposal | None:
    """``proposal`` as ``remember`` would build it from the same fields; None if refused."""
    if proposal.authority == Authority.EXPLICIT_ADMIN:  # reserved to remember_global
        return None
    fields = proposal_item(proposal)
    try:
        content, scope = fields.pop("content"), fields.pop("scope")
        return build_proposal(config, content, scope=scope, **proposal_fields(fields, "fact"))
    except InvalidArgument:
        return None


def _grounded(proposal: Proposal, episode: Record) -> Proposal:
    """``proposal`` tied to ``episode``: its scope, provenance, time and governance."""
    source = Source.coerce({"kind": "conversation", "ref": episode.source.ref,
                            "derived_from": [episode.id]})  # fmt: skip
    sensitivity = max(proposal.sensitivity, episode.sensitivity, key=_RANK.__getitem__)
    return dataclasses.replace(
        proposal, scope=episode.scope, source=source, observed_at=episode.observed_at,
        sensitivity=sensitivity, purpose=episode.purpose, consent_basis=episode.consent_basis,
        private=episode.private or proposal.private,
    )  # fmt: skip


def fact_items(group: Group, proposer: Proposer, config: Config, now: datetime) -> list[FactItem]:
    """The facts the group's episodes state, as write units with their owning agent.

    A proposal of a type the configuration does not know is dropped (an LLM
    proposer may invent one), and so is one that ``remember`` would refuse (a
    custom proposer's NUL or out-of-range field): a proposer builds ``Proposal``
    values itself, so they are checked here as ``remember``'s arguments are."""
    items: list[FactItem] = []
    for episode in group.episodes:
        for proposed in proposer.propose([_turn(episode)]):
            proposal = _checked(config, proposed)
            if proposal is None or proposal.type not in config.types:
                continue
            grounded = _grounded(proposal, episode)
            agent = owning_agent(episode.agent_id, grounded)
            items.append((agent, expand(grounded, episode.scope, config.write, now)))
    return items
