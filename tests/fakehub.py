"""A fake Hugging Face Hub for tests: serves one checkpoint directory as ``org/repo``.

Two ``http.server`` servers bound to 127.0.0.1 (ephemeral ports): the "hub" and a "CDN". Like
the real Hub, ``/{repo}/resolve/{rev}/{file}`` answers ``.safetensors`` files with a 302 to the
CDN (another origin, so ``Authorization`` must not follow), and small files directly.

* ``HEAD``: 200 with ``ETag``, ``X-Repo-Commit``, ``Content-Length`` (302 plus
  ``X-Linked-Size``/``X-Linked-Etag`` for LFS files); 404 + ``X-Error-Code`` otherwise.
* ``GET`` with ``Range: bytes=a-b``: 206 + ``Content-Range``; 416 past the end; no Range: 200.
* ``GET /api/models/{repo}/revision/{rev}``: ``{"id", "sha", "siblings": [{"rfilename"}]}``.

Switches (attributes, change them before the request): ``missing`` (404 and not listed),
``truncate`` (pretend the file has this many bytes), ``ignore_range`` (200 with the whole body),
``content_range`` (send this Content-Range instead, None: none at all), ``fail`` (statuses
answered first, one per request), ``require_token`` (401 GatedRepo without it), ``forbidden``
(403 GatedRepo for these files), ``garbage`` (serve these bytes instead), ``api`` (False: no
listing API, 404), ``retry_after`` (the Retry-After value sent with a 429), ``error_message``
(an X-Error-Message sent with 401/403 answers), ``location`` (send this Location for a file's
redirect instead of the CDN), ``slow`` (``{file: (phase, seconds)}``: a slow-loris answer, one
byte every ``seconds``, during ``"headers"`` or the ``"body"``), ``latency`` (seconds slept before
answering any request, on both servers, as a round trip to a far server costs), ``branch_commit``
(the X-Repo-Commit answered to requests by branch name: another value plays a branch that moved
after the listing), ``api_body`` (bytes answered by the listing API instead of the listing),
``content_length`` (``{file: value}``: the Content-Length sent with a 200 answer to a Range request
of that file under ``ignore_range``, the connection closed after the body). Counters:
``served[file]`` body bytes written, ``log`` of requests (``conn`` tells connections apart: HTTP/1.1
keep-alive is on).
"""

from __future__ import annotations

import http.client
import http.server
import itertools
import json
import os
import re
import select
import socket
import ssl
import sys
import threading
import time
from pathlib import Path
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_MISSING: Any = object()
_CONNECTIONS = itertools.count(1)


class FakeHub:
    def __init__(self, root: Path, repo: str = "org/repo", tls: ssl.SSLContext | None = None) -> None:
        self.root = Path(root)
        self.repo = repo
        self.missing: set[str] = set()
        self.truncate: dict[str, int] = {}
        self.ignore_range: set[str] = set()
        self.content_range: dict[str, str | None] = {}
        self.fail: dict[str, list[int]] = {}
        self.require_token: str | None = None
        self.forbidden: set[str] = set()
        self.garbage: dict[str, bytes] = {}
        self.api = True
        self.retry_after = "0"
        self.error_message = "Access to this repo is restricted"
        self.location: dict[str, str] = {}
        self.slow: dict[str, tuple[str, float]] = {}
        self.latency = 0.0
        self.branch_commit = COMMIT
        self.api_body: bytes | None = None
        self.content_length: dict[str, str] = {}
        self.served: dict[str, int] = {}
        self.log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.scheme = "https" if tls is not None else "http"
        self.hub = _server(self, "hub", tls)
        self.cdn = _server(self, "cdn", tls)
        self._threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True) for s in (self.hub, self.cdn)]

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.hub.server_address[1]}"

    @property
    def cdn_origin(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.cdn.server_address[1]}"

    def start(self) -> "FakeHub":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        for s in (self.hub, self.cdn):
            s.shutdown()
            s.server_close()

    def files(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_file() and p.name not in self.missing)

    def shard_bytes(self) -> int:
        return sum(os.path.getsize(self.root / n) for n in self.files() if n.endswith(".safetensors"))

    def connections(self, server: str | None = None) -> int:
        return len({(r["server"], r["conn"]) for r in self.log if server is None or r["server"] == server})

    def requests(self, file: str | None = None, server: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.log if (file is None or r["file"] == file) and (server is None or r["server"] == server)]


class QuietServer(http.server.ThreadingHTTPServer):
    """A test server that does not print a traceback when a client drops a kept-alive connection (the
    client closing its pool is the normal end of a test, not an error)."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def _server(hub: FakeHub, role: str, tls: ssl.SSLContext | None = None) -> http.server.ThreadingHTTPServer:
    class Handler(_Handler):
        pass

    Handler.hub, Handler.role = hub, role
    srv = QuietServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        srv.socket = tls.wrap_socket(srv.socket, server_side=True)
    return srv


class _Handler(http.server.BaseHTTPRequestHandler):
    hub: FakeHub
    role: str
    protocol_version = "HTTP/1.1"  # keep-alive, like the real Hub and CDN
    conn_no = 0

    def setup(self) -> None:
        super().setup()
        self.conn_no = next(_CONNECTIONS)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._handle(head=True)

    def do_GET(self) -> None:
        self._handle(head=False)

    # -------------------------------------------------------------- routing

    def _handle(self, head: bool) -> None:
        hub = self.hub
        path = self.path.split("?", 1)[0]
        file = None
        m = re.fullmatch(r"/(.+)/resolve/([^/]+)/(.+)", path) if self.role == "hub" else None
        c = re.fullmatch(r"/cdn/[0-9a-f]+/(.+)", path) if self.role == "cdn" else None
        a = re.fullmatch(r"/api/models/(.+?)(?:/revision/([^/]+))?", path) if self.role == "hub" else None
        if m:
            file = _unquote(m.group(3))
        elif c:
            file = _unquote(c.group(1))
        with hub._lock:
            hub.log.append({"server": self.role, "method": self.command, "path": path, "file": file,
                            "range": self.headers.get("Range"), "auth": self.headers.get("Authorization"),
                            "conn": self.conn_no})
        if hub.latency:
            time.sleep(hub.latency)
        try:
            if file is not None and file in hub.slow and (m or c):
                return self._slow(*hub.slow[file])
            if a and not m:
                return self._api(_unquote(a.group(1)), _unquote(a.group(2) or "main"))
            if m:
                return self._resolve(_unquote(m.group(1)), _unquote(m.group(2)), file, head)
            if c:
                return self._serve(file, head)
            self._status(404, {"X-Error-Code": "EntryNotFound"})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _slow(self, phase: str, every: float) -> None:
        """A slow-loris answer: one byte every ``every`` seconds, in the status line and headers or
        in a body that claims 1 MB, until the client goes away."""
        self.close_connection = True
        head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"
        if phase == "body":
            self.wfile.write(head)
            head = b"x" * 1_000_000
        for i in range(len(head)):
            self.wfile.write(head[i:i + 1])
            self.wfile.flush()
            time.sleep(every)

    def _status(self, code: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self) -> bool:
        want = self.hub.require_token
        return want is None or self.headers.get("Authorization") == f"Bearer {want}"

    def _api(self, repo: str, rev: str) -> None:
        hub = self.hub
        if not hub.api:
            return self._status(404, body=b"Not Found")
        if not self._authorized():
            return self._status(401, {"X-Error-Code": "GatedRepo", "X-Error-Message": hub.error_message})
        if repo != hub.repo:
            return self._status(404, {"X-Error-Code": "RepoNotFound"})
        if rev not in ("main", COMMIT):
            return self._status(404, {"X-Error-Code": "RevisionNotFound"})
        doc = {"id": repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in hub.files()]}
        body = hub.api_body if hub.api_body is not None else json.dumps(doc).encode()
        self._status(200, {"Content-Type": "application/json"}, body)

    def _resolve(self, repo: str, rev: str, file: str, head: bool) -> None:
        hub = self.hub
        if repo != hub.repo:
            return self._status(404, {"X-Error-Code": "RepoNotFound"})
        if rev not in ("main", COMMIT, hub.branch_commit):
            return self._status(404, {"X-Error-Code": "RevisionNotFound"})
        if not self._authorized():
            return self._status(401, {"X-Error-Code": "GatedRepo", "X-Error-Message": hub.error_message})
        if file in hub.forbidden:
            return self._status(403, {"X-Error-Code": "GatedRepo", "X-Error-Message": hub.error_message})
        if "/" in file or file in hub.missing or not (hub.root / file).is_file():
            return self._status(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT})
        with hub._lock:
            queue = hub.fail.get(file)
            status = queue.pop(0) if queue else None
        if status is not None:
            return self._status(status, {"Retry-After": hub.retry_after} if status == 429 else None, b"try again")
        common = {"X-Repo-Commit": COMMIT if rev == COMMIT else hub.branch_commit, "ETag": f'"{abs(hash(file)):x}"'}
        if file.endswith(".safetensors"):
            size = self._size(file)
            loc = hub.location.get(file) or f"{hub.cdn_origin}/cdn/{abs(hash(file)):x}/{file}?sig=abc"
            return self._status(302, {**common, "Location": loc, "X-Linked-Size": str(size),
                                      "X-Linked-Etag": f'"{abs(hash(file)):x}"'})
        self._serve(file, head, common)

    # -------------------------------------------------------------- bodies

    def _size(self, file: str) -> int:
        hub = self.hub
        if file in hub.garbage:
            return len(hub.garbage[file])
        return hub.truncate.get(file, os.path.getsize(hub.root / file))

    def _serve(self, file: str, head: bool, headers: dict[str, str] | None = None) -> None:
        hub = self.hub
        if file in hub.missing or not (hub.root / file).is_file():
            return self._status(404, {"X-Error-Code": "EntryNotFound"})
        size = self._size(file)
        headers = dict(headers or {})
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if head or m is None or file in hub.ignore_range:
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            if file in hub.content_length and not head and m is not None:
                self.send_header("Content-Length", hub.content_length[file])
                self.send_header("Connection", "close")
                self.close_connection = True
            else:
                self.send_header("Content-Length", str(size))
            self.end_headers()
            if not head:
                self._body(file, 0, size)
            return
        a = int(m.group(1))
        b = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        if a >= size:
            return self._status(416, {"Content-Range": f"bytes */{size}"})
        cr = hub.content_range.get(file, _MISSING)
        self.send_response(206)
        for k, v in headers.items():
            self.send_header(k, v)
        if cr is _MISSING:
            self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        elif cr is not None:
            self.send_header("Content-Range", cr)
        self.send_header("Content-Length", str(b - a + 1))
        self.end_headers()
        self._body(file, a, b + 1)

    def _body(self, file: str, start: int, end: int) -> None:
        hub = self.hub
        if file in hub.garbage:
            data = hub.garbage[file][start:end]
            self.wfile.write(data)
            with hub._lock:
                hub.served[file] = hub.served.get(file, 0) + len(data)
            return
        with open(hub.root / file, "rb") as f:
            f.seek(start)
            left = end - start
            while left > 0:
                chunk = f.read(min(left, 1 << 16))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
                with hub._lock:
                    hub.served[file] = hub.served.get(file, 0) + len(chunk)


def _unquote(s: str) -> str:
    from urllib.parse import unquote

    return unquote(s)


class ForwardProxy:
    """A forward proxy on 127.0.0.1 (``http_proxy``/``https_proxy``): GETs in absolute form are
    forwarded, ``CONNECT`` is tunnelled. ``log``: (method, target, Proxy-Authorization) per request."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, str | None]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                from urllib.parse import urlsplit

                proxy.log.append(("GET", self.path, self.headers.get("Proxy-Authorization")))
                u = urlsplit(self.path)
                conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
                keep = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "connection")}
                conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers=keep)
                r = conn.getresponse()
                body = r.read()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                conn.close()

            def do_CONNECT(self) -> None:
                proxy.log.append(("CONNECT", self.path, self.headers.get("Proxy-Authorization")))
                host, _, port = self.path.rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=30)
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True
                socks = [self.connection, upstream]
                try:
                    while True:
                        ready, _, _ = select.select(socks, [], [], 30)
                        if not ready:
                            return
                        for s in ready:
                            data = s.recv(1 << 16)
                            if not data:
                                return
                            (upstream if s is self.connection else self.connection).sendall(data)
                except OSError:
                    return
                finally:
                    upstream.close()

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
