"""The one way the Python tests wait for a real process: a bounded poll of a condition.

The programs under test run on the wall clock (TSC time) and announce nothing when a condition
turns true (a counter passes a value, a socket appears, a log line is written), so a test reads
the condition again until it holds. The condition decides; the bound only turns a hang into a
failure with a message, and a watched process that exits ends the wait at once instead of
running the bound out. Nothing here waits a fixed time for something to have happened."""
import subprocess
import time

POLL_INTERVAL_S = 0.02  # between reads of the condition: short against every bound


def wait_for(condition, bound_s, what, proc=None, interval_s=POLL_INTERVAL_S):
    """Returns condition()'s first truthy value. Fails (AssertionError naming `what`) once
    bound_s have passed, or as soon as `proc` (a subprocess.Popen, optional) has exited."""
    deadline = time.monotonic() + bound_s
    while True:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited (status {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {bound_s} s waiting for {what}")
        if proc is None:
            time.sleep(interval_s)
            continue
        try:  # returns early when the process exits: the next round reports it
            proc.wait(timeout=interval_s)
        except subprocess.TimeoutExpired:
            pass
