"""`adapters.views.gc_pause`: the collector off while a log is folded, as it was after."""

from __future__ import annotations

import gc
import threading

from adapters.views.gc_pause import gc_paused


def test_the_collector_is_off_inside_and_on_again_after_nested_and_overlapping_blocks() -> None:
    assert gc.isenabled()
    inside: list[bool] = []
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            entered.set()
            release.wait(5)
            inside.append(gc.isenabled())

    thread = threading.Thread(target=other)
    with gc_paused():
        inside.append(gc.isenabled())
        with gc_paused():
            inside.append(gc.isenabled())
        inside.append(gc.isenabled())
        thread.start()
        entered.wait(5)
    inside.append(gc.isenabled())  # the other thread's block still runs
    release.set()
    thread.join(5)

    assert inside == [False, False, False, False, False]
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_on_again_after_a_block_that_raised() -> None:
    try:
        with gc_paused():
            raise KeyError("x")
    except KeyError:
        pass

    assert gc.isenabled()
