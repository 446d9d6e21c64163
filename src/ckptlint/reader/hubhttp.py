"""HTTP GETs for the Hub reader (:mod:`ckptlint.reader.remote`), with the standard library only.

* Connections are kept alive and reused per origin (a round trip and a TLS handshake saved per
  request); ``http_proxy``/``https_proxy``/``no_proxy`` are honoured as ``urllib`` does (plain
  requests to the proxy for ``http``, a ``CONNECT`` tunnel for ``https``).
* Redirects are followed (at most 10), only to ``http``/``https`` URLs; ``Authorization`` is sent
  only to the endpoint's own origin, never to the host a redirect leads to.
* Time is bounded three ways: ``timeout`` for connecting and between two packets; a deadline
  for each attempt (``ATTEMPT_TIMEOUTS`` × timeout for the answer's headers, plus one second per
  ``MIN_RATE`` bytes of body), enforced by closing the socket, so a server that trickles bytes
  cannot hold a request; and a budget for a request with its retries (``REQUEST_TIMEOUTS`` ×
  timeout) inside the client's overall budget (``TOTAL_TIMEOUTS`` × timeout, from its first request).
* 429, 5xx, connection errors, timeouts and short bodies are retried (``ATTEMPTS`` in all) with
  exponential backoff from ``BACKOFF`` s; ``Retry-After`` (seconds or a date) is honoured up to
  ``MAX_BACKOFF`` s and within the request's budget.
* Every message is one line, names hosts without credentials, and has every secret the client
  knows (the token, proxy passwords) and any ``Bearer``/``Basic`` value replaced by ``***``.
"""

from __future__ import annotations

import email.utils
import http
import http.client
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from base64 import b64encode
from dataclasses import dataclass, field
from email.message import Message
from typing import Iterable

from ckptlint import __version__
from ckptlint.reader.hubconn import WATCHDOG, HTTPConnection, HTTPSConnection

ATTEMPTS = 4  # per request: 1 + 3 retries
BACKOFF = 0.5  # seconds, doubled per retry (tests lower it)
MAX_BACKOFF = 10.0
ATTEMPT_TIMEOUTS = 3  # an answer's headers must arrive within this many timeouts ...
MIN_RATE = 256 * 1024  # ... and its body at this many bytes per second at least
REQUEST_TIMEOUTS = 6  # one request, retries included
TOTAL_TIMEOUTS = 60  # everything one client fetches
MAX_REDIRECTS = 10
MAX_ERROR_BODY = 64 * 1024  # read (and dropped) from an error or redirect answer to keep the connection
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
_CTRL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_AUTH_VALUE = re.compile(r"\b(Bearer|Basic|token)(\s+|=)\S+", re.IGNORECASE)
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


class RemoteError(OSError):
    """One request failed; ``why`` is the one-line reason used in findings and messages."""

    def __init__(self, why: str, status: int | None = None, headers: Message | None = None,
                 retryable: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.status = status
        self.headers = headers
        self.retryable = retryable
        self.error_text = why


@dataclass
class Reply:
    status: int
    headers: Message
    body: bytes
    url: str  # where the answer came from, after redirects


def clean(text: object, limit: int = 300) -> str:
    """Server- or user-supplied text made safe for a one-line message: no control characters, bounded."""
    s = _CTRL.sub("?", str(text))
    return s if len(s) <= limit else s[:limit] + "..."


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each secret, credentials in URLs and ``Bearer``/``Basic`` values replaced by ``***``."""
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    text = _AUTH_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
    return _USERINFO.sub("***@", text)


def host_of(url: str) -> str:
    """``host[:port]`` of a URL, without credentials."""
    try:
        u = urllib.parse.urlsplit(url)
        host = u.hostname or ""
        port = u.port
    except ValueError:
        return "?"
    host = f"[{host}]" if ":" in host else host
    return clean(f"{host}:{port}" if port else host, 100)


def origin(url: str) -> tuple[str, str, int | None]:
    u = urllib.parse.urlsplit(url)
    try:
        port = u.port
    except ValueError:
        port = None
    port = port or (443 if u.scheme == "https" else 80 if u.scheme == "http" else None)
    return (u.scheme.lower(), (u.hostname or "").lower(), port)


def status_text(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def error_reason(headers: Message | None) -> str:
    if headers is None:
        return ""
    parts = [clean(p, 200) for p in (headers.get("X-Error-Code"), headers.get("X-Error-Message")) if p]
    return f" ({': '.join(parts)})" if parts else ""


# HTTP numbers (Content-Length, Content-Range, Retry-After) are read only when they are plain ASCII
# digits, at most this many: 19 digits hold every byte count and delay a server can mean (2**63 - 1),
# and a longer run is refused before any conversion (Python's int() refuses more than 4,300 digits
# with an error of its own; a hostile server sends 5,000).
HTTP_NUMBER_DIGITS = 19


def http_number(value: object) -> int | None:
    """A non-negative HTTP integer (header text or a regex group), or None when it is not 1 to
    :data:`HTTP_NUMBER_DIGITS` ASCII digits (spaces around it allowed)."""
    if not isinstance(value, str):
        return None
    v = value.strip()
    if not v or len(v) > HTTP_NUMBER_DIGITS or not (v.isascii() and v.isdigit()):
        return None
    return int(v)


def _retry_after(headers: Message | None) -> float | None:
    v = (headers.get("Retry-After") or "").strip() if headers is not None else ""
    if not v:
        return None
    if v.isascii() and v.isdigit():
        n = http_number(v)
        return float(n) if n is not None else None  # (longer than any delay: not honoured, as a bad date)
    if len(v) > 64:  # an HTTP date is 29 characters
        return None
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


# ---------------------------------------------------------------------------------- the client


@dataclass
class _Route:
    key: tuple
    target: str  # the request target: a path, or the absolute URL for a plain proxy
    host: str
    port: int
    https: bool
    proxy: tuple[str, int] | None = None
    proxy_headers: dict[str, str] = field(default_factory=dict)


class HttpClient:
    """Thread-safe GETs with keep-alive, redirects, retries, deadlines and redacted messages."""

    def __init__(self, endpoint: str, token: str | None, timeout: float) -> None:
        self.endpoint_origin = origin(endpoint)
        self.token = token
        self.timeout = timeout
        self._ua = f"ckptlint/{__version__}; python-http.client"
        self._proxies = {k: v for k, v in urllib.request.getproxies().items() if k in ("http", "https")}
        self.secrets = [s for s in [token] if s]
        for p in self._proxies.values():
            pw = urllib.parse.urlsplit(p if "://" in p else f"http://{p}").password
            if pw:
                self.secrets.append(pw)
        self._idle: dict[tuple, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._ssl: ssl.SSLContext | None = None
        self._end: float | None = None  # the overall deadline, set by the first request

    # -------------------------------------------------------------- public

    def get(self, url: str, *, start: int | None = None, end: int | None = None, limit: int) -> Reply:
        """GET ``url`` (bytes ``start..end`` inclusive when given), reading at most ``limit`` body
        bytes. Raises :class:`RemoteError` (with a redacted message) after the retries."""
        try:
            return self._get(url, start, end, limit)
        except RemoteError as e:
            e.why = e.error_text = redact(e.why, self.secrets)
            e.args = (e.why,)
            raise

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for c in conns:
                c.close()

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    # -------------------------------------------------------------- retries

    def _get(self, url: str, start: int | None, end: int | None, limit: int) -> Reply:
        now = time.monotonic()
        with self._lock:
            if self._end is None:
                self._end = now + TOTAL_TIMEOUTS * self.timeout
            total_end = self._end
        budget = min(now + REQUEST_TIMEOUTS * self.timeout, total_end)
        last: RemoteError | None = None
        tries = 0
        for attempt in range(ATTEMPTS):
            if attempt:
                delay = min(MAX_BACKOFF, BACKOFF * 2 ** (attempt - 1))
                asked = _retry_after(last.headers if last is not None else None)
                if asked is not None:
                    delay = max(delay, min(asked, MAX_BACKOFF))
                if time.monotonic() + delay >= budget:
                    break
                time.sleep(delay)
            if time.monotonic() >= budget:
                break
            tries += 1
            try:
                return self._attempt(url, start, end, limit, budget)
            except RemoteError as e:
                if not e.retryable:
                    raise
                last = e
        if last is None:
            total = TOTAL_TIMEOUTS * self.timeout
            raise RemoteError(f"not requested: the time limit for all requests ({total:g} s, "
                              f"{TOTAL_TIMEOUTS} x HF_HUB_DOWNLOAD_TIMEOUT) was used up", retryable=False)
        why = f"{last.why} (gave up after {tries} attempt{'s' if tries != 1 else ''}"
        if tries < ATTEMPTS:
            why += f": the time limit for a request ({budget - now:.3g} s) was reached"
        raise RemoteError(why + ")", last.status, last.headers)

    def _attempt(self, url: str, start: int | None, end: int | None, limit: int, budget: float) -> Reply:
        cur = url
        for _ in range(MAX_REDIRECTS + 1):
            status, headers, body = self._exchange(cur, start, end, limit, budget)
            if status in REDIRECT_STATUS:
                cur = self._follow(cur, headers)
                continue
            if status >= 400:
                raise RemoteError(f"HTTP {status} {status_text(status)}{error_reason(headers)}", status, headers,
                                  retryable=status in RETRY_STATUS)
            return Reply(status, headers, body, cur)
        raise RemoteError(f"more than {MAX_REDIRECTS} redirects, starting at {host_of(url)}")

    def _follow(self, cur: str, headers: Message) -> str:
        loc = (headers.get("Location") or "").strip()
        if not loc or len(loc) > 8192 or _CTRL.search(loc):
            raise RemoteError(f"{host_of(cur)} answered with a redirect without a usable Location header")
        new = urllib.parse.urljoin(cur, loc)
        scheme = urllib.parse.urlsplit(new).scheme.lower()
        if scheme not in ("http", "https"):
            raise RemoteError(f"{host_of(cur)} redirected to a {clean(scheme, 20) or 'relative'}: URL; "
                              "only http and https redirects are followed")
        return new

    # -------------------------------------------------------------- one exchange

    def _exchange(self, url: str, start: int | None, end: int | None, limit: int,
                  budget: float) -> tuple[int, Message, bytes]:
        route = self._route(url)
        headers = {"User-Agent": self._ua, "Accept-Encoding": "identity"}
        if start is not None:
            headers["Range"] = f"bytes={start}-{end}"
        if self.token and origin(url) == self.endpoint_origin:
            headers["Authorization"] = f"Bearer {self.token}"
        if route.proxy is not None and not route.https:
            headers.update(route.proxy_headers)
        host = host_of(url)
        for fresh in (False, True):
            conn = None if fresh else self._take(route.key)
            reused = conn is not None
            if conn is None:
                conn = self._connect(route)
            t0 = time.monotonic()
            guard = WATCHDOG.arm(conn, min(budget, t0 + ATTEMPT_TIMEOUTS * self.timeout))
            resp = None
            try:
                conn.request("GET", route.target, headers=headers)
                resp = conn.getresponse()
                status = resp.status
                want = limit if status < 300 else MAX_ERROR_BODY
                length = _length(resp)
                WATCHDOG.move(guard, min(budget, guard.deadline + min(want, length or want) / MIN_RATE))
                body = _read(resp, want)
                if WATCHDOG.disarm(guard):
                    raise OSError("deadline")
                if length is not None and len(body) < min(want, length):
                    raise RemoteError(f"the response from {host} ended after {len(body):,} of {length:,} bytes",
                                      retryable=True)
                if resp.isclosed() and not resp.will_close:
                    self._give(route.key, conn)
                else:  # more body than wanted (a server that ignored Range): stop here
                    conn.close()
                return status, resp.headers, body
            except RemoteError:
                conn.close()
                raise
            except (http.client.HTTPException, OSError, ValueError, UnicodeError) as e:
                expired = WATCHDOG.disarm(guard)
                conn.close()
                if expired:
                    took = time.monotonic() - t0
                    raise RemoteError(f"no complete answer from {host} within {took:.3g} s (the server is too slow "
                                      "or stalled)", retryable=True) from None
                if reused and resp is None and isinstance(e, (ConnectionError, http.client.RemoteDisconnected,
                                                              http.client.BadStatusLine)):
                    continue  # a kept-alive connection the server had closed: once more on a new one
                raise _failure(e, host, self.timeout) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _route(self, url: str) -> _Route:
        try:
            u = urllib.parse.urlsplit(url)
            port = u.port
        except ValueError as e:
            raise RemoteError(f"not a usable URL ({clean(e, 100)})") from None
        scheme = u.scheme.lower()
        if scheme not in ("http", "https") or not u.hostname:
            raise RemoteError(f"not an http(s) URL: {clean(scheme, 20)}:")
        https = scheme == "https"
        port = port or (443 if https else 80)
        target = u.path or "/"
        if u.query:
            target += "?" + u.query
        proxy = self._proxies.get(scheme)
        if proxy and not urllib.request.proxy_bypass(u.hostname):
            p = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            try:
                paddr = (p.hostname or "", p.port or 80)
            except ValueError:
                raise RemoteError(f"the {scheme}_proxy setting is not a usable URL") from None
            ph = {}
            if p.username is not None:
                cred = f"{urllib.parse.unquote(p.username)}:{urllib.parse.unquote(p.password or '')}"
                ph["Proxy-Authorization"] = "Basic " + b64encode(cred.encode()).decode()
            if not https:
                target = urllib.parse.urlunsplit((scheme, u.netloc.rpartition("@")[2], u.path or "/", u.query, ""))
            return _Route((scheme, u.hostname, port, paddr), target, u.hostname, port, https, paddr, ph)
        return _Route((scheme, u.hostname, port, None), target, u.hostname, port, https)

    def _connect(self, route: _Route) -> http.client.HTTPConnection:
        host, port = route.proxy if route.proxy is not None else (route.host, route.port)
        if route.https:
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            conn: http.client.HTTPConnection = HTTPSConnection(host, port, timeout=self.timeout, context=self._ssl)
            if route.proxy is not None:
                conn.set_tunnel(route.host, route.port, headers=route.proxy_headers)
        else:
            conn = HTTPConnection(host, port, timeout=self.timeout)
        return conn

    def _take(self, key: tuple) -> http.client.HTTPConnection | None:
        with self._lock:
            conns = self._idle.get(key)
            return conns.pop() if conns else None

    def _give(self, key: tuple, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            conns = self._idle.setdefault(key, [])
            if len(conns) < 64:
                conns.append(conn)
                return
        conn.close()


def _length(resp: http.client.HTTPResponse) -> int | None:
    return http_number(resp.getheader("Content-Length") or "")


def _read(resp: http.client.HTTPResponse, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        b = resp.read(min(left, 1 << 20))
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    if left <= 0 and not resp.isclosed() and resp.length == 0:
        resp.read()  # only the end of a chunked body is left: read it, the connection stays usable
    return b"".join(chunks)


def _failure(e: BaseException, host: str, timeout: float) -> RemoteError:
    if isinstance(e, (TimeoutError, socket.timeout)):
        return RemoteError(f"no answer from {host} within {timeout:g} s", retryable=True)
    if isinstance(e, http.client.IncompleteRead):
        return RemoteError(f"the response from {host} ended early ({len(e.partial)} bytes received, more expected)",
                           retryable=True)
    if isinstance(e, (socket.gaierror, ConnectionRefusedError)):
        return RemoteError(f"cannot connect to {host}: {clean(_reason(e), 200)}", retryable=True)
    if isinstance(e, ssl.SSLCertVerificationError):
        return RemoteError(f"cannot connect to {host}: certificate verification failed "
                           f"({clean(e.verify_message or e, 200)})")
    if isinstance(e, (ValueError, UnicodeError, http.client.InvalidURL)):
        return RemoteError(f"cannot request from {host}: {clean(e, 200)}")
    return RemoteError(f"connection to {host} failed: {clean(_reason(e), 200)}", retryable=True)


def _reason(r: BaseException) -> str:
    if isinstance(r, OSError) and r.strerror:
        return r.strerror
    return str(r) or type(r).__name__
