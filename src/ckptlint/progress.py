"""A one-line progress indicator on stderr (plain ``\\r``-rewritten text, no dependency).

Shown only when the stream is a terminal and the caller asked for it (``check`` does unless
``--quiet``); updates are throttled, and the line is erased when done so that nothing of it is
left in the terminal or in a captured stderr.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO


class Progress:
    def __init__(self, total: int, label: str, stream: IO[str] | None = None, interval: float = 0.1) -> None:
        self.total, self.label, self.interval = total, label, interval
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self._last = 0.0
        self._width = 0
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            now = time.monotonic()
            if now - self._last < self.interval and self.done < self.total:
                return
            self._last = now
            self._write(f"{self.label}: {self.done}/{self.total}")

    def _write(self, text: str) -> None:
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        try:
            self.stream.write("\r" + text + pad)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        with self._lock:
            if self._width:
                try:
                    self.stream.write("\r" + " " * self._width + "\r")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
                self._width = 0


def progress_for(enabled: bool, total: int, label: str, stream: IO[str] | None = None) -> Progress | None:
    """A :class:`Progress` when ``enabled`` and the stream is a terminal, else None."""
    if not enabled or total <= 0:
        return None
    s = stream if stream is not None else sys.stderr
    try:
        if not s.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return Progress(total, label, s)
