"""Read a checkpoint straight from a Hugging Face repository: ``hf://ORG/REPO[@REVISION]``.

Only the standard library is used (``urllib``), so ``huggingface_hub`` is never needed. What is
fetched, from ``{endpoint}/{repo}/resolve/{revision}/{file}``:

* the file list, from ``{endpoint}/api/models/{repo}/revision/{revision}`` (its ``sha`` pins
  every later request to one commit). A server without that API (a mirror) is probed instead:
  ``config.json``, ``hf_quant_config.json`` and ``model.safetensors.index.json`` are fetched,
  and ``model.safetensors`` is looked for only when there is no index; a shard the index names
  is then found missing when fetching it answers 404;
* the JSON side files, whole (at most 256 MB);
* per shard, ``Range: bytes=0-99999`` (the size comes from ``Content-Range: bytes a-b/SIZE``),
  then one more range for the rest of the header when it is longer. Never the tensor data: a
  server that ignores ``Range`` (200 instead of 206) is read only as far as needed, then the
  connection is closed.

Redirects are followed (the Hub sends large files to a CDN); ``Authorization: Bearer
$HF_TOKEN`` is sent to the endpoint and dropped on a redirect to another origin. Requests time
out (``HF_HUB_DOWNLOAD_TIMEOUT``, default 10 s) and are retried with backoff on 429, 5xx and
connection errors. Shards are read concurrently (8 threads).

A repository that cannot be reached at all (offline mode, unknown repository or revision,
access denied, no network) raises :class:`RemoteUnavailable` (exit 2). Problems with one file
become the same findings a local read gives (a shard the index names that is not there: IX204;
a shard shorter than its header says: SF113; ...); HTTP errors on a shard are SF117 findings
whose message says what the server answered.
"""

from __future__ import annotations

import http
import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.message import Message

from ckptlint.reader import codes as C
from ckptlint.reader.header import ShardInfo, ShardRead, _f, read_header
from ckptlint.reader.jsonfiles import JsonRead, parse_json_bytes
from ckptlint.reader.names import CONFIG_NAME, HF_SCHEME, INDEX_NAME, QUANT_CONFIG_NAME
from ckptlint.reader.source import NotACheckpoint, Source

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_REVISION = "main"
FIRST_RANGE = 100_000  # bytes asked for first (huggingface_hub asks for the same)
MAX_JSON = 256 * 1024 * 1024
WORKERS = 8
ATTEMPTS = 4  # per request: 1 + 3 retries
BACKOFF = 0.5  # seconds, doubled per retry (tests lower it)
MAX_BACKOFF = 10.0
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_TRUE = {"1", "on", "yes", "true"}
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$")
_UNSATISFIED = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$")


class RemoteUnavailable(NotACheckpoint):
    """The repository cannot be read at all (offline, not found, access denied, unreachable)."""


class RemoteError(OSError):
    """One request failed; ``why`` is the one-line reason used in findings."""

    def __init__(self, why: str, status: int | None = None, headers: Message | None = None,
                 retryable: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.status = status
        self.headers = headers
        self.retryable = retryable
        self.error_text = why


def offline() -> bool:
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def parse_hf_url(url: str) -> tuple[str, str | None]:
    """``hf://ORG/REPO[@REVISION]`` -> (``ORG/REPO``, revision or None)."""
    rest = url[len(HF_SCHEME):] if url.startswith(HF_SCHEME) else url
    repo, at, rev = rest.partition("@")
    repo = repo.strip("/")
    parts = repo.split("/")
    if not 1 <= len(parts) <= 2 or not all(_SEGMENT.match(p) and ".." not in p for p in parts):
        raise RemoteUnavailable(f"{url}: not a Hugging Face model repository: expected hf://ORG/REPO[@REVISION]")
    if at and (not rev or rev.startswith("/") or ".." in rev.split("/") or any(c in rev for c in "\0\\?#")):
        raise RemoteUnavailable(f"{url}: bad revision {rev!r} (a branch, tag or commit id)")
    return repo, (rev or None)


def _token() -> str | None:
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        v = os.environ.get(k, "").strip()
        if v:
            return v
    return None


def _origin(url: str) -> tuple[str, str, int | None]:
    u = urllib.parse.urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80 if u.scheme == "http" else None)
    return (u.scheme.lower(), (u.hostname or "").lower(), port)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects; keep ``Authorization`` only while the origin stays the same."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            auth = req.get_header("Authorization")
            if auth and _origin(new.full_url) == _origin(req.full_url):
                new.add_unredirected_header("Authorization", auth)
        return new


@dataclass
class _Reply:
    status: int
    headers: Message
    body: bytes


class HubClient:
    """HTTP GETs with timeouts, retries and token handling (thread safe)."""

    def __init__(self, endpoint: str, token: str | None, timeout: float) -> None:
        self.endpoint = endpoint
        self.token = token
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_Redirects())
        from ckptlint import __version__

        self._ua = f"ckptlint/{__version__}; python-urllib"

    def get(self, url: str, *, start: int | None = None, end: int | None = None, limit: int) -> _Reply:
        """GET ``url`` (bytes ``start..end`` inclusive when given), reading at most ``limit``
        body bytes; retries on 429/5xx/connection errors. Raises :class:`RemoteError`."""
        last: RemoteError | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                delay = min(MAX_BACKOFF, BACKOFF * 2 ** (attempt - 1))
                ra = last.headers.get("Retry-After") if last is not None and last.headers is not None else None
                if ra and ra.strip().isascii() and ra.strip().isdigit():
                    delay = min(MAX_BACKOFF, max(delay, float(ra.strip())))
                time.sleep(delay)
            try:
                return self._get_once(url, start, end, limit)
            except RemoteError as e:
                if not e.retryable:
                    raise
                last = e
        assert last is not None
        raise RemoteError(f"{last.why} (gave up after {ATTEMPTS} attempts)", last.status, last.headers)

    def _get_once(self, url: str, start: int | None, end: int | None, limit: int) -> _Reply:
        req = urllib.request.Request(url, headers={"User-Agent": self._ua, "Accept-Encoding": "identity"})
        if start is not None:
            req.add_header("Range", f"bytes={start}-{end}")
        if self.token and _origin(url) == _origin(self.endpoint):
            req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        try:
            resp = self._opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            status, headers = e.code, e.headers
            try:
                e.close()
            except Exception:  # noqa: BLE001 - closing a failed response
                pass
            reason = _error_reason(headers)
            raise RemoteError(f"HTTP {status} {_status_text(status)}{reason}", status, headers,
                              retryable=status in RETRY_STATUS) from None
        except urllib.error.URLError as e:
            raise RemoteError(f"cannot connect to {_host(url)}: {_reason(e.reason)}", retryable=True) from None
        except (TimeoutError, socket.timeout):
            raise RemoteError(f"no answer from {_host(url)} within {self.timeout:g} s", retryable=True) from None
        except (http.client.HTTPException, ConnectionError, OSError) as e:
            raise RemoteError(f"connection to {_host(url)} failed: {_reason(e)}", retryable=True) from None
        try:
            status = resp.status
            body = self._read(resp, limit, url)
            return _Reply(status, resp.headers, body)
        finally:
            resp.close()  # stop here even if the server sends more (200 instead of 206)

    def _read(self, resp: http.client.HTTPResponse, limit: int, url: str) -> bytes:
        chunks: list[bytes] = []
        left = limit
        try:
            while left > 0:
                b = resp.read(min(left, 1 << 20))
                if not b:
                    break
                chunks.append(b)
                left -= len(b)
        except http.client.IncompleteRead as e:
            raise RemoteError(f"the response from {_host(url)} ended early ({len(e.partial)} more bytes "
                              "received, more expected)", retryable=True) from None
        except (TimeoutError, socket.timeout):
            raise RemoteError(f"{_host(url)} stopped sending within {self.timeout:g} s", retryable=True) from None
        except (http.client.HTTPException, ConnectionError, OSError) as e:
            raise RemoteError(f"connection to {_host(url)} failed while reading: {_reason(e)}",
                              retryable=True) from None
        body = b"".join(chunks)
        length = resp.headers.get("Content-Length")
        if length and length.strip().isascii() and length.strip().isdigit() and len(body) < min(limit, int(length)):
            raise RemoteError(f"the response from {_host(url)} ended after {len(body):,} of {int(length):,} bytes",
                              retryable=True)
        return body


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


def _reason(r: object) -> str:
    if isinstance(r, OSError) and r.strerror:
        return r.strerror
    return str(r) or type(r).__name__


def _status_text(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def _error_reason(headers: Message | None) -> str:
    if headers is None:
        return ""
    code = headers.get("X-Error-Code")
    msg = headers.get("X-Error-Message")
    parts = [p for p in (code, msg) if p]
    return f" ({': '.join(parts)})" if parts else ""


class _RemoteBlob:
    """A remote file as a :class:`~ckptlint.reader.header.ByteSource`: the bytes of the first
    range are kept, later reads fetch only what is missing."""

    def __init__(self, client: HubClient, url: str, size: int, prefix: bytes, received: int) -> None:
        self.client, self.url, self.size = client, url, size
        self.buf = prefix  # bytes [0, len(buf)) of the file
        self.bytes_read = received

    def read(self, offset: int, length: int) -> bytes:
        want_end = min(offset + length, self.size)
        for _ in range(16):
            if want_end <= len(self.buf):
                return self.buf[offset:want_end]
            start = len(self.buf)
            r = self.client.get(self.url, start=start, end=want_end - 1, limit=want_end)
            self.bytes_read += len(r.body)
            if r.status == 206:
                first, last, _total = _content_range(r, self.url, start)
                got = r.body[: last - first + 1]
            else:  # the server ignored Range: the body starts at byte 0
                got = r.body[start:want_end]
            if not got:
                break
            self.buf += got
        if want_end > len(self.buf):
            raise RemoteError(f"the server did not send bytes {len(self.buf):,}-{want_end - 1:,} of the file")
        return self.buf[offset:want_end]  # pragma: no cover - loop returns first


def _content_range(r: _Reply, url: str, start: int) -> tuple[int, int, int]:
    cr = r.headers.get("Content-Range")
    m = _CONTENT_RANGE.match(cr or "")
    if m is None or m.group(3) == "*":
        got = f"{cr!r}" if cr else "none"
        raise RemoteError(f"the server answered a range request (HTTP 206) without a usable Content-Range "
                          f"header (got {got}), so the file size is unknown")
    first, last, total = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if first != start or last < first or last >= total:
        raise RemoteError(f"the server answered bytes={start}-... with the wrong range (Content-Range: {cr})")
    if len(r.body) < last - first + 1:
        raise RemoteError(f"the server sent {len(r.body):,} bytes for Content-Range {cr}")
    return first, last, total


class HubRepo(Source):
    """A Hugging Face model repository as a checkpoint :class:`Source`."""

    progress_min_shards = 1  # a remote check shows progress for any number of shards

    def __init__(self, url: str, *, endpoint: str | None = None, progress: bool = False) -> None:
        self.root = url
        self.progress = progress
        self.repo_id, rev = parse_hf_url(url)
        self.revision = rev or DEFAULT_REVISION
        ep = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
        if urllib.parse.urlsplit(ep).scheme not in ("http", "https") or not urllib.parse.urlsplit(ep).netloc:
            raise RemoteUnavailable(f"{url}: endpoint {ep!r} is not an http(s) URL (--endpoint / HF_ENDPOINT)")
        self.endpoint = ep
        try:
            timeout = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or 10)
        except ValueError:
            timeout = 10.0
        self.client = HubClient(ep, _token(), timeout)
        self._names: set[str] | None = None
        self._json: dict[str, JsonRead] = {}
        self._commit: str | None = None
        self._lock = threading.Lock()
        self._probed: ShardRead | None = None

    # ------------------------------------------------------------------ URLs

    def _url(self, name: str) -> str:
        rev = self._commit or self.revision
        return (f"{self.endpoint}/{urllib.parse.quote(self.repo_id, safe='/')}/resolve/"
                f"{urllib.parse.quote(rev, safe='')}/{urllib.parse.quote(name, safe='/')}")

    def _pin(self, headers: Message | None) -> None:
        sha = (headers.get("X-Repo-Commit") or "").strip() if headers is not None else ""
        if re.fullmatch(r"[0-9a-f]{40}", sha):
            with self._lock:
                if self._commit is None:
                    self._commit = sha

    def _fatal(self, e: RemoteError, what: str) -> RemoteUnavailable:
        """The error that makes the whole repository unreadable, as a usage error."""
        code = e.headers.get("X-Error-Code") if e.headers is not None else None
        where = f"{self.root} ({self.endpoint})"
        if code == "RevisionNotFound":
            return RemoteUnavailable(f"{where}: revision {self.revision!r} not found")
        if code == "RepoNotFound":
            return RemoteUnavailable(f"{where}: repository {self.repo_id!r} not found "
                                     "(or private: set HF_TOKEN to a token that can read it)")
        if e.status in (401, 403):
            return RemoteUnavailable(f"{where}: {_access_text(e, bool(self.client.token))}")
        if e.status == 404:
            return RemoteUnavailable(f"{where}: {what}: HTTP 404 Not Found")
        return RemoteUnavailable(f"{where}: {what}: {e.why}")

    # ------------------------------------------------------------------ Source

    def names(self) -> set[str]:
        if self._names is not None:
            return self._names
        if offline():
            raise RemoteUnavailable(
                f"{self.root}: remote checks need the network, but offline mode is on (HF_HUB_OFFLINE=1); "
                "unset it, or check a local copy (e.g. the snapshot directory in the Hugging Face cache)")
        names = self._list()
        if names is None:
            names = self._probe()
            self.complete = False
        self._names = names
        return names

    def _list(self) -> set[str] | None:
        url = (f"{self.endpoint}/api/models/{urllib.parse.quote(self.repo_id, safe='/')}/revision/"
               f"{urllib.parse.quote(self.revision, safe='')}")
        try:
            r = self.client.get(url, limit=MAX_JSON)
        except RemoteError as e:
            code = e.headers.get("X-Error-Code") if e.headers is not None else None
            if e.status is None or code in ("RepoNotFound", "RevisionNotFound"):
                raise self._fatal(e, "listing the repository") from None
            return None  # no listing API here (a mirror), or not allowed: probe the files instead
        try:
            doc = json.loads(r.body)
            siblings = doc["siblings"]
            names = {s["rfilename"] for s in siblings if isinstance(s, dict) and isinstance(s.get("rfilename"), str)}
        except (ValueError, KeyError, TypeError):
            return None
        sha = doc.get("sha") if isinstance(doc, dict) else None
        if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}", sha):
            self._commit = sha
        return {n for n in names if "/" not in n}

    def _probe(self) -> set[str]:
        wanted = [CONFIG_NAME, QUANT_CONFIG_NAME, INDEX_NAME]
        with ThreadPoolExecutor(max_workers=3) as ex:
            got = dict(zip(wanted, ex.map(self._fetch_json, wanted)))
        names = set()
        for name, res in got.items():
            if isinstance(res, RemoteError):
                if res.status in (401, 403) or (res.headers is not None and res.headers.get("X-Error-Code") in
                                                 ("RepoNotFound", "RevisionNotFound")) or res.status is None:
                    raise self._fatal(res, f"fetching {name}")
                if res.status == 404:
                    continue
                self._json[name] = JsonRead(error=f"cannot be read ({res.why})", unreadable=True)
            else:
                self._json[name] = res
            names.add(name)
        if INDEX_NAME not in names:
            probe = self.read_one("model.safetensors")
            if not probe.missing:
                names.add("model.safetensors")
                self._probed = probe
        return names

    def _fetch_json(self, name: str) -> JsonRead | RemoteError:
        try:
            r = self.client.get(self._url(name), limit=MAX_JSON + 1)
        except RemoteError as e:
            return e
        self._pin(r.headers)
        if len(r.body) > MAX_JSON:
            return JsonRead(error=f"is larger than {MAX_JSON // 2**20} MB; not read", unreadable=True)
        return parse_json_bytes(r.body)

    def read_json(self, name: str) -> JsonRead:
        if name in self._json:
            return self._json[name]
        res = self._fetch_json(name)
        if isinstance(res, RemoteError):
            if res.status in (401, 403):
                return JsonRead(error=f"cannot be read: {_access_text(res, bool(self.client.token))}", unreadable=True)
            return JsonRead(error=f"cannot be read ({res.why})", unreadable=True)
        self._json[name] = res
        return res

    def _map(self, fn, names: list[str]):
        with ThreadPoolExecutor(max_workers=max(1, min(WORKERS, len(names)))) as ex:
            yield from ex.map(fn, names)

    def read_one(self, name: str) -> ShardRead:
        if self._probed is not None and name == "model.safetensors":
            return self._probed
        url = self._url(name)
        try:
            r = self.client.get(url, start=0, end=FIRST_RANGE - 1, limit=FIRST_RANGE)
        except RemoteError as e:
            if e.status == 416:  # empty file: "Content-Range: bytes */0"
                m = _UNSATISFIED.match(e.headers.get("Content-Range") or "") if e.headers is not None else None
                if m is not None:
                    return read_header(name, _RemoteBlob(self.client, url, int(m.group(1)), b"", 0))
            return self._failed(name, e)
        self._pin(r.headers)
        try:
            if r.status == 206:
                first, last, size = _content_range(r, url, 0)
                prefix = r.body[: last + 1]
            else:  # 200: the server ignored Range; only the first bytes of the body were read
                length = r.headers.get("Content-Length")
                if length and length.strip().isascii() and length.strip().isdigit():
                    size = int(length)
                elif len(r.body) < FIRST_RANGE:
                    size = len(r.body)
                else:
                    raise RemoteError("the server ignored the Range request (HTTP 200) and sent no Content-Length, "
                                      "so the file size is unknown")
                prefix = r.body
        except RemoteError as e:
            return self._failed(name, e, received=len(r.body))
        return read_header(name, _RemoteBlob(self.client, url, size, prefix, len(r.body)))

    def _failed(self, name: str, e: RemoteError, received: int = 0) -> ShardRead:
        if e.status in (401, 403):
            why = f"cannot be fetched: {_access_text(e, bool(self.client.token))}"
        elif e.status == 404:
            why = "cannot be fetched: HTTP 404 Not Found (no such file in the repository)"
        else:
            why = f"cannot be fetched: {e.why}"
        res = ShardRead(info=ShardInfo(file=name, size=0, bytes_read=received), fatal=True, refused=True,
                        unreadable=why, missing=e.status == 404)
        res.issues.append(_f(C.SF_UNREADABLE, name, why, None,
                             hint="check the repository, revision and HF_TOKEN, then run the check again"))
        return res


def _access_text(e: RemoteError, token_sent: bool) -> str:
    gated = (e.headers.get("X-Error-Code") == "GatedRepo") if e.headers is not None else False
    detail = _error_reason(e.headers)
    what = "a gated repository" if gated else "a gated or private repository"
    if token_sent:
        return (f"access denied (HTTP {e.status}{detail}): {what}, and the token in HF_TOKEN does not give access "
                "(accept the model's terms on its Hub page, or use a token with read access)")
    return (f"access denied (HTTP {e.status}{detail}): {what}; set HF_TOKEN to a Hugging Face token with read "
            "access (after accepting the model's terms on its Hub page)")
