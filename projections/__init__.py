"""Projections: rule sets, the step reading, folds into read models, the turn input with its notes.
Pure: no I/O. Imports point inward only (`projections -> domain`). See ADR-030 in docs/spec-map.md."""
