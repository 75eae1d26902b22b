"""The one polling loop of the tests."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, what: str = "condition") -> T:
    """Call `predicate` every `interval` seconds until it returns a true value, and return that value; after `timeout`
    seconds raise AssertionError naming `what`. The predicate runs at least once and once more at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(min(interval, remaining))
