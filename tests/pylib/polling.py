"""The one polling helper of the Python tests (tests/integration/harness.py
re-exports it; tests/redis/script_harness.py uses it too).

Tests never sleep to wait for time to pass: they poll a condition with a
deadline, and the short sleep between two polls is a poll interval."""
import time


def wait_until(predicate, timeout=5.0, what="condition", ignore=(), interval=0.005):
    """Polls `predicate` until it returns a true value (returned) or `timeout`
    seconds pass (AssertionError naming `what`). An exception of a type in
    `ignore` raised by `predicate` counts as "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except ignore:
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)  # a poll interval, not a wait for time to pass
