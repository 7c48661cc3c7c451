"""Projections: the rule sets, the step reading (RefusedCalls), incremental folds of a
conversation's events into read models, and the turn input with its notes (ADR-030: docs/spec-map.md).

Pure: no I/O. Imports point inward only (`projections -> domain`).
"""
