"""The tests' one polling helper: wait on a condition, never a fixed sleep.

`wait_for` calls a check until it returns something true and returns that; past its timeout
it fails with what it waited for. Timeouts are generous (a loaded 2-core machine is normal):
a test waits only as long as its condition takes, and only a broken one waits the whole
timeout.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

GENEROUS = 120.0  # seconds; only a broken test ever waits this long


def wait_for(check: Callable[[], T], what: str | Callable[[], Any] = "the condition",
             timeout: float = GENEROUS, every: float = 0.05) -> T:
    """Call `check` every `every` seconds until it returns a true value, and return that
    value; after `timeout` seconds fail, saying `what` was waited for (a callable is called
    then, for a message read at that moment: a worker's log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"gave up after {timeout:g} s waiting for {said}")
        time.sleep(every)
