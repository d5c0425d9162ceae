"""Lifecycle operations: forgetting, erasure, export and import."""
