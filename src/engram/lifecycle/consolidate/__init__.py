"""Consolidation, the "sleep cycle": old episodes into summaries, facts and statistics.

``consolidate`` (``runner``) takes one user (or each user of a tenant) under a
lease and, for each group of old episodes (``grouping``: by session, then by
topic), writes one summary (``summarise``: extractive by default, ``llm``: any
OpenAI-compatible chat endpoint), proposes the facts its episodes state
(``facts``), counts the procedure outcomes they report (``outcomes``), all in
one transaction; then merges near-duplicate facts (``merge``). ``report`` holds
what a run did, ``cli`` the ``engram consolidate`` command. docs/lifecycle.md
describes the whole cycle.
"""

from engram.lifecycle.consolidate.llm import LLMSummariser
from engram.lifecycle.consolidate.outcomes import ProcedureOutcomes
from engram.lifecycle.consolidate.report import ConsolidationReport
from engram.lifecycle.consolidate.runner import Tools, consolidate
from engram.lifecycle.consolidate.summarise import ExtractiveSummariser, Summariser

__all__ = [
    "ConsolidationReport",
    "ExtractiveSummariser",
    "LLMSummariser",
    "ProcedureOutcomes",
    "Summariser",
    "Tools",
    "consolidate",
]
