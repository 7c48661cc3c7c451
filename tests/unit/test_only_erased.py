"""`only_erased`: which text a row keeps as it is once its conversation's key was erased."""

from __future__ import annotations

from adapters.store.crypto import ERASED
from adapters.views.row_bodies import only_erased
from projections.transcript import JOIN


def test_erased_answers_joined_are_kept_as_the_log_reads_them() -> None:
    assert only_erased(ERASED)
    assert only_erased(ERASED + JOIN + ERASED + JOIN + ERASED)
    assert only_erased(ERASED + JOIN)  # an empty answer joined


def test_any_other_text_is_not_kept() -> None:
    assert not only_erased("Antwort")
    assert not only_erased(ERASED + JOIN + "Antwort")
    assert not only_erased("[erased ]")
