"""Connections for :mod:`ckptlint.reader.hubhttp` whose requests end by a deadline.

http.client's timeout bounds each wait for a packet, not a whole answer: a server that sends one
byte every few seconds would hold a request for as long as it likes. :data:`WATCHDOG` is one
thread that shuts down the socket of every request still running at its deadline; the blocked
read then returns and the request fails. The connection classes keep their socket in ``raw`` from
the moment it exists (the TLS handshake included), because after an answer with ``Connection:
close`` the response object is its only other holder.
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import socket
import threading
import time


class _Guard:
    __slots__ = ("deadline", "conn", "expired", "live")

    def __init__(self, conn: http.client.HTTPConnection, deadline: float) -> None:
        self.deadline, self.conn, self.expired, self.live = deadline, conn, False, True


class _Watchdog:
    """One thread that shuts the socket of every request still running at its deadline (a
    blocked read then returns), so no server can hold a request longer."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, _Guard]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, conn: http.client.HTTPConnection, deadline: float) -> _Guard:
        g = _Guard(conn, deadline)
        self.move(g, deadline)
        return g

    def move(self, g: _Guard, deadline: float) -> None:
        with self._cv:
            g.deadline = deadline
            heapq.heappush(self._heap, (deadline, next(self._seq), g))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ckptlint-http-deadlines", daemon=True)
                self._thread.start()
            self._cv.notify()

    def disarm(self, g: _Guard) -> bool:
        with self._cv:
            g.live = False
            return g.expired

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._heap and (not self._heap[0][2].live or self._heap[0][2].deadline != self._heap[0][0]):
                    heapq.heappop(self._heap)  # finished, or moved
                if not self._heap:
                    self._cv.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                g = heapq.heappop(self._heap)[2]
                g.expired = True
            sock = getattr(g.conn, "raw", None)  # the response may hold it alone (Connection: close)
            if sock is not None:
                try:
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass


WATCHDOG = _Watchdog()


class _Raw:
    """Keeps the connection's socket in ``raw`` from the moment it exists (the TLS handshake
    included) for the deadline watchdog; the response may be its only other holder."""

    raw: socket.socket | None = None

    def _keep_raw(self) -> None:
        create = self._create_connection  # type: ignore[attr-defined]

        def create_and_keep(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.raw = create(*args, **kwargs)
            return self.raw

        self._create_connection = create_and_keep  # type: ignore[attr-defined]

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.raw = self.sock  # type: ignore[attr-defined]  # the TLS socket, once there is one


class HTTPConnection(_Raw, http.client.HTTPConnection):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._keep_raw()


class HTTPSConnection(_Raw, http.client.HTTPSConnection):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._keep_raw()
