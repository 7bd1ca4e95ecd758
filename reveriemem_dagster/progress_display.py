"""The progress line `reveriemem build` shows on stderr.

It listens to the steps' progress events (`reveriemem.core.progress`) and to every
model call and cache hit in the process (`reveriemem.models.usage`), and shows
the current step, its units (scenes) done of total, the model calls, cached
answers and tokens so far, the model calls in flight when several run at
once, the time elapsed and an estimate of the time left
in the step (from the rate at which its units are done). On a terminal it
rewrites one line about four times a second; otherwise (a log file, CI) it
prints a line at most every 10 seconds, and only when something changed.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from reveriemem.core import progress
from reveriemem.models import usage
from reveriemem.models.usage import ModelCall, UsageTotals

TTY_INTERVAL_S = 0.25
LOG_INTERVAL_S = 10.0


class ProgressDisplay:
    """Start it around a build (`with ProgressDisplay(): ...`); `message()` announces a phase."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = tty if tty is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (TTY_INTERVAL_S if self.tty else LOG_INTERVAL_S)
        self.clock = clock
        self.totals = UsageTotals()
        self._lock = threading.Lock()
        self._started = clock()
        self._phase = ""
        self._step = ""
        self._step_total = 0
        self._step_done = 0
        self._step_started = self._started
        self._in_flight = 0
        self._shown = ""  # the state last printed (log mode), or the line on screen (tty mode)
        self._last_print = float("-inf")
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> ProgressDisplay:
        self._started = self._step_started = self.clock()
        progress.add_listener(self.on_progress)
        usage.add_listener(self.on_call)
        self._ticker = threading.Thread(target=self._tick, name="reveriemem-progress", daemon=True)
        self._ticker.start()
        return self

    def stop(self) -> None:
        """Stop listening and leave the final state on its own line."""
        progress.remove_listener(self.on_progress)
        usage.remove_listener(self.on_call)
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        with self._lock:
            calls = self.totals.summary()
            active = bool(self._phase or self._step or calls["calls"] or calls["cached_calls"])
            final = self._line(self.clock()) + "\n" if active else ""
            self._write(("\r\033[K" if self.tty else "") + final)

    def __enter__(self) -> ProgressDisplay:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- listeners ---------------------------------------------------------

    def message(self, text: str) -> None:
        """A new phase of the build (e.g. one Dagster run): printed on its own line."""
        with self._lock:
            self._phase = text
            self._step, self._step_total, self._step_done = "", 0, 0  # the last run's step is over
            self._write(("\r\033[K" if self.tty else "") + f"... {text}\n")
            self._shown = ""

    def on_progress(self, event: progress.ProgressEvent) -> None:
        with self._lock:
            if event.kind == "in_flight":
                self._in_flight = event.done
                return
            if event.kind == "started":
                self._step, self._step_total, self._step_done = event.step, event.total, 0
                self._step_started = self.clock()
                return
            if event.step != self._step:  # units of a step whose start was not seen
                self._step, self._step_total, self._step_started = event.step, 0, self.clock()
            self._step_done = event.done

    def on_call(self, call: ModelCall) -> None:
        self.totals.add(call)

    # -- rendering ---------------------------------------------------------

    def line(self, now: float | None = None) -> str:
        with self._lock:
            return self._line(self.clock() if now is None else now)

    def _line(self, now: float) -> str:
        parts = []
        if self._step:
            units = f"{self._step_done}/{self._step_total}" if self._step_total else f"{self._step_done}"
            parts.append(f"{self._step}: {units} scenes")
        else:
            parts.append(self._phase or "starting")
        calls = self.totals.summary()
        model = f"{calls['calls']} model calls"
        if calls["cached_calls"]:
            model += f" (+{calls['cached_calls']} cached)"
        parts.append(f"{model}, {_count(int(calls['total_tokens']))} tokens")
        if self._in_flight > 1:
            parts.append(f"{self._in_flight} calls in flight")
        parts.append(f"{_duration(now - self._started)} elapsed")
        left = self._left(now)
        if left is not None:
            parts.append(f"~{_duration(left)} left in step")
        return " | ".join(parts)

    def _left(self, now: float) -> float | None:
        done, total = self._step_done, self._step_total
        if not self._step or total <= 0 or done <= 0 or done >= total:
            return None
        rate = done / max(now - self._step_started, 1e-9)
        return (total - done) / rate

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self.render()

    def render(self, now: float | None = None) -> None:
        """Show the current state if due (called by the ticker thread)."""
        with self._lock:
            now = self.clock() if now is None else now
            line = self._line(now)
            if self.tty:
                if line != self._shown:
                    # the cursor goes back to the start, so a log line printed meanwhile overwrites this one
                    self._write("\r\033[K" + line + "\r")
                    self._shown = line
                return
            state = self._state()
            if state != self._shown and now - self._last_print >= self.interval:
                self._write(line + "\n")
                self._shown, self._last_print = state, now

    def _state(self) -> str:
        calls = self.totals.summary()
        return f"{self._phase}|{self._step}|{self._step_done}|{calls['calls']}|{calls['cached_calls']}|{self._in_flight}"

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: the build goes on
            pass


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _count(value: int) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return str(value)
