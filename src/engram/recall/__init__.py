"""The read path: intent -> plan -> candidates -> eligibility -> dedup -> rerank ->
conflicts -> budget -> render -> trace. ``pipeline`` runs the stages in order."""
