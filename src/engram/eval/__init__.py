"""Evaluation plumbing: benchmark loaders, retrieval metrics and reports."""
