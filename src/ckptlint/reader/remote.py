"""Read a checkpoint straight from a Hugging Face repository: ``hf://ORG/REPO[@REVISION]``.

Only the standard library is used (:mod:`ckptlint.reader.hubhttp`), so ``huggingface_hub`` is
never needed. What is fetched, from ``{endpoint}/{repo}/resolve/{revision}/{file}``:

* the file list, from ``{endpoint}/api/models/{repo}/revision/{revision}`` (its ``sha`` pins
  every later request to one commit). A server without that API (a mirror) is probed instead:
  ``config.json``, ``hf_quant_config.json`` and ``model.safetensors.index.json`` are fetched,
  and ``model.safetensors`` is looked for only when there is no index; a shard the index names
  is then found missing when fetching it answers 404;
* the JSON side files, whole (at most 256 MB), all at once;
* per shard, one range that should hold the whole header: sized from the tensor names the index
  gives for that shard and the bytes per tensor entry the shards read so far used
  (:class:`_Sizer`); without an index, 100,000 bytes first. The size comes from ``Content-Range:
  bytes a-b/SIZE``. When the header is longer, one more range for the rest, asked straight from
  where the first was redirected to. Never more than the header and that one range: a server
  that ignores ``Range`` (200 instead of 206) is read only as far as needed, then the connection
  is closed.

Shards are read ``WORKERS`` at a time. In ``ckptlint check`` everything starts in the background
(:meth:`HubRepo.start`) while the command sets itself up: the listing, then the JSON files, then
the shards as soon as the index (which sizes their first range) has arrived.

A repository that cannot be reached at all (offline mode, unknown repository or revision,
access denied, no network) or settings that cannot work (a malformed ``HF_ENDPOINT`` or
``HF_HUB_DOWNLOAD_TIMEOUT``, a token that cannot be sent) raise :class:`RemoteUnavailable`
(exit 2). Problems with one file become the same findings a local read gives (a shard the index
names that is not there: IX204; a shard shorter than its header says: SF113; ...); HTTP errors on
a shard are SF117 findings whose message says what the server answered.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from concurrent.futures import Future, ThreadPoolExecutor
from email.message import Message

from ckptlint.reader import hubsettings
from ckptlint.reader.header import ShardInfo, ShardRead, ShardUnreadable, read_header
from ckptlint import jsonlimits
from ckptlint.reader.hubhttp import ATTEMPTS, HttpClient, RemoteError, Reply, clean, error_reason, http_number
from ckptlint.reader.hubsettings import DEFAULT_REVISION, RemoteUnavailable, offline, parse_hf_url
from ckptlint.reader.jsonfiles import JsonRead, parse_json_bytes
from ckptlint.reader.names import CONFIG_NAME, INDEX_NAME, QUANT_CONFIG_NAME
from ckptlint.reader.report import shard_finding
from ckptlint.reader.source import Source, shard_files

__all__ = ["ATTEMPTS", "FIRST_RANGE", "HubRepo", "RemoteError", "RemoteUnavailable", "parse_hf_url"]

FIRST_RANGE = 100_000  # bytes asked for first when nothing says how long the header is
MAX_JSON = 256 * 1024 * 1024
WORKERS = 16
SIDE_FILES = (INDEX_NAME, CONFIG_NAME, QUANT_CONFIG_NAME)  # the index first: it sizes the shard reads
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$")
_UNSATISFIED = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$")


# ---------------------------------------------------------------------------------- sizing


class _Sizer:
    """How many bytes to ask for first, per shard: ideally the whole header and no more.

    With an index, a shard's header holds, per tensor the index gives it, the name in quotes
    and an entry of a fairly constant size (``{"dtype":..,"shape":[..],"data_offsets":[..]}``);
    that entry size is learned from the shards already read (5% over the largest seen, which is
    bounded by twice the median: shards hold different mixes of tensors), and guessed
    (``ENTRY_GUESS``) until one is. Without an index: the largest header seen, else
    ``FIRST_RANGE``. Too small costs one more request; too large, bytes past the header."""

    ENTRY_GUESS = 80
    MIN, MAX = 1024, 8 * 1024 * 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._per_shard: dict[str, tuple[int, int]] = {}  # shard -> (tensors, bytes of quoted names)
        self._entry: list[float] = []
        self._headers: list[int] = []

    def use_index(self, obj: object) -> None:
        wm = obj.get("weight_map") if isinstance(obj, dict) else None
        if not isinstance(wm, dict):
            return
        by: dict[str, list[str]] = {}
        for t, s in wm.items():
            if isinstance(s, str) and isinstance(t, str):
                by.setdefault(s, []).append(t)
        per = {}
        for s, ts in by.items():
            b = sum(map(len, ts)) if "".join(ts).isascii() else sum(len(t.encode("utf-8", "replace")) for t in ts)
            per[s] = (len(ts), b + 2 * len(ts))
        with self._lock:
            self._per_shard = per

    def first_range(self, name: str) -> int:
        with self._lock:
            known = self._per_shard.get(name)
            if known is not None:
                n, names = known
                if self._entry:  # shards hold different mixes of tensors: 5% more than the largest seen
                    entry = min(max(self._entry), 2 * sorted(self._entry)[len(self._entry) // 2]) * 1.05 + 2
                    want = names + n * entry + 128
                else:
                    want = (names + n * self.ENTRY_GUESS) * 1.02 + 256
            elif self._headers:
                want = max(self._headers) * 1.05 + 128
            else:
                want = FIRST_RANGE
        return int(min(self.MAX, max(self.MIN, want)))

    def observe(self, name: str, header_total: int) -> None:
        """``header_total``: 8 + the header length of a shard read cleanly."""
        with self._lock:
            self._headers.append(header_total)
            known = self._per_shard.get(name)
            if known is not None and known[0]:
                self._entry.append((header_total - known[1]) / known[0])


# ---------------------------------------------------------------------------------- one file


class _RemoteBlob:
    """A remote file as a :class:`~ckptlint.reader.header.ByteSource`: the bytes of the first
    range are kept, later reads fetch only what is missing, from where the first read was
    redirected to (then from the repository URL again if that fails)."""

    def __init__(self, client: HttpClient, url: str, size: int, prefix: bytes, received: int,
                 direct: str | None = None) -> None:
        self.client, self.url, self.size = client, url, size
        self.direct = direct if direct and direct != url else None
        self.buf = prefix  # bytes [0, len(buf)) of the file
        self.bytes_read = received

    def _get(self, start: int, end: int) -> Reply:
        if self.direct is not None:
            try:
                return self.client.get(self.direct, start=start, end=end, limit=end + 1)
            except RemoteError as e:
                if e.status is None or e.status >= 500 or e.status == 416:
                    raise
                self.direct = None  # e.g. a signed CDN URL that expired: ask the Hub again
        return self.client.get(self.url, start=start, end=end, limit=end + 1)

    def read(self, offset: int, length: int) -> bytes:
        want_end = min(offset + length, self.size)
        for _ in range(16):
            if want_end <= len(self.buf):
                return self.buf[offset:want_end]
            start = len(self.buf)
            r = self._get(start, want_end - 1)
            self.bytes_read += len(r.body)
            if r.status == 206:
                first, last, _total = _content_range(r, start)
                got = r.body[: last - first + 1]
            else:  # the server ignored Range: the body starts at byte 0
                got = r.body[start:want_end]
            if not got:
                break
            self.buf += got
        if want_end > len(self.buf):
            raise RemoteError(f"the server did not send bytes {len(self.buf):,}-{want_end - 1:,} of the file")
        return self.buf[offset:want_end]  # pragma: no cover - loop returns first


def _content_range(r: Reply, start: int) -> tuple[int, int, int]:
    cr = r.headers.get("Content-Range")
    m = _CONTENT_RANGE.match(cr or "")
    if m is None or m.group(3) == "*":
        got = f"{clean(cr, 80)!r}" if cr else "none"
        raise RemoteError(f"the server answered a range request (HTTP 206) without a usable Content-Range "
                          f"header (got {got}), so the file size is unknown")
    first, last, total = http_number(m.group(1)), http_number(m.group(2)), http_number(m.group(3))
    if first is None or last is None or total is None:
        raise RemoteError(f"the server answered a range request (HTTP 206) with numbers too long to be byte "
                          f"positions (Content-Range: {clean(cr, 80)})")
    if first != start or last < first or last >= total:
        raise RemoteError(f"the server answered bytes={start}-... with the wrong range (Content-Range: {clean(cr, 80)})")
    if len(r.body) < last - first + 1:
        raise RemoteError(f"the server sent {len(r.body):,} bytes for Content-Range {clean(cr, 80)}")
    return first, last, total


# ---------------------------------------------------------------------------------- the repository


class HubRepo(Source):
    """A Hugging Face model repository as a checkpoint :class:`Source`."""

    progress_min_shards = 1  # a remote check shows progress for any number of shards

    def __init__(self, url: str, *, endpoint: str | None = None, progress: bool = False) -> None:
        self.repo_id, rev = parse_hf_url(url)
        self.root = url
        self.progress = progress
        self.revision = rev or DEFAULT_REVISION
        self.endpoint = hubsettings.endpoint(endpoint)
        self.client = HttpClient(self.endpoint, hubsettings.token(), hubsettings.timeout())
        self._names: set[str] | None = None
        self._json: dict[str, JsonRead] = {}
        self._commit: str | None = None
        self._lock = threading.Lock()
        self._probed: ShardRead | None = None
        self._sizer = _Sizer()
        self._pool: ThreadPoolExecutor | None = None
        self._boot: Future | None = None
        self._json_jobs: dict[str, Future] = {}
        self._seen: dict[str, str] = {}  # JSON file -> the commit its answer named
        self._shard_jobs: dict[str, Future] = {}
        self._closed = False

    # ------------------------------------------------------------------ background work

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="ckptlint-hub")
            return self._pool

    def start(self) -> None:
        """List the repository, then fetch its JSON files and shard headers, in the background."""
        if self._boot is None and not offline():
            self._boot = self._executor().submit(self._bootstrap)

    def _bootstrap(self) -> set[str]:
        # The JSON files are asked for by revision at once, alongside the listing (a round trip
        # saved); one whose answer names another commit than the listing is fetched again, pinned.
        ex = self._executor()
        with self._lock:
            for n in SIDE_FILES:
                self._json_jobs[n] = ex.submit(self._fetch_json, n, self.revision)
        names = self._list_or_probe()
        if self.complete:  # the listing is authoritative: every shard file is read, whatever the index says
            self._submit_shards(shard_files(names))
        for n in SIDE_FILES:
            if n in names and self._commit is not None and self._seen.get(n) != self._commit:
                got = self._json_jobs[n].result()  # (a failure, retried already, stays one)
                if not isinstance(got, RemoteError) and self._seen.get(n) != self._commit:
                    self._json_jobs[n] = ex.submit(self._fetch_json, n)
        return names

    def _fetch_side_files(self, names: set[str]) -> None:
        """Start fetching the JSON files the listing names (the index first: it sizes the shard reads)."""
        ex = self._executor()
        with self._lock:
            for n in SIDE_FILES:
                if n in names and n not in self._json and n not in self._json_jobs:
                    self._json_jobs[n] = ex.submit(self._fetch_json, n)

    def prefetch(self, names: list[str], share: float | None = None) -> None:
        if self._names is not None:
            self._fetch_side_files(self._names)
        self._submit_shards(names)

    def _submit_shards(self, names: list[str]) -> None:
        ex = self._executor()
        with self._lock:
            for n in names:
                if n not in self._shard_jobs:
                    self._shard_jobs[n] = ex.submit(self._read_sized, n)

    def _map(self, fn, names: list[str]):
        self.prefetch(names)
        for n in names:
            yield self._shard_jobs[n].result()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    # ------------------------------------------------------------------ URLs

    def _url(self, name: str, revision: str | None = None) -> str:
        rev = revision or self._commit or self.revision
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
        where = f"{self.root} ({self.client.redact(self.endpoint)})"
        if code == "RevisionNotFound":
            return RemoteUnavailable(f"{where}: revision {clean(self.revision, 80)!r} not found")
        if code == "RepoNotFound":
            return RemoteUnavailable(f"{where}: repository {self.repo_id!r} not found "
                                     "(or private: set HF_TOKEN to a token that can read it)")
        if e.status in (401, 403):
            return RemoteUnavailable(f"{where}: {self._access_text(e)}")
        if e.status == 404:
            return RemoteUnavailable(f"{where}: {what}: HTTP 404 Not Found")
        return RemoteUnavailable(f"{where}: {what}: {e.why}")

    # ------------------------------------------------------------------ Source

    def names(self) -> set[str]:
        if self._names is None:
            if self._boot is not None:
                self._names = self._boot.result()
            else:
                self._names = self._list_or_probe()
        return self._names

    def _list_or_probe(self) -> set[str]:
        if offline():
            raise RemoteUnavailable(
                f"{self.root}: remote checks need the network, but offline mode is on (HF_HUB_OFFLINE=1); "
                "unset it, or check a local copy (e.g. the snapshot directory in the Hugging Face cache)")
        names = self._list()
        if names is None:
            names = self._probe()
            self.complete = False
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
            doc = jsonlimits.loads(r.body)  # (the limits of every JSON document: a refusal is "no listing")
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
        ex = self._executor()
        jobs = [self._json_jobs.get(n) or ex.submit(self._fetch_json, n) for n in wanted]
        got = dict(zip(wanted, [f.result() for f in jobs]))
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

    def _fetch_json(self, name: str, revision: str | None = None) -> JsonRead | RemoteError:
        """Fetch and parse a JSON file, at the pinned commit (or at ``revision``)."""
        try:
            r = self.client.get(self._url(name, revision), limit=MAX_JSON + 1)
        except RemoteError as e:
            return e
        self._pin(r.headers)
        self._seen[name] = (r.headers.get("X-Repo-Commit") or "").strip()
        if len(r.body) > MAX_JSON:
            return JsonRead(error=f"is larger than {MAX_JSON // 2**20} MB; not read", unreadable=True)
        res = parse_json_bytes(r.body)
        if name == INDEX_NAME and res.error is None:
            self._sizer.use_index(res.obj)
        return res

    def read_json(self, name: str) -> JsonRead:
        if name in self._json:
            return self._json[name]
        job = self._json_jobs.get(name)
        res = job.result() if job is not None else self._fetch_json(name)
        if isinstance(res, RemoteError):
            if res.status in (401, 403):
                return JsonRead(error=f"cannot be read: {self._access_text(res)}", unreadable=True)
            return JsonRead(error=f"cannot be read ({res.why})", unreadable=True)
        self._json[name] = res
        return res

    def _read_sized(self, name: str) -> ShardRead:
        """Read one shard's header, its first range sized once the index (if it is coming) is here."""
        job = self._json_jobs.get(INDEX_NAME)
        if job is not None:
            job.result()
        if self._closed:
            return self._failed(name, RemoteError("not read: the check was stopped"))
        res = self.read_one(name, self._sizer.first_range(name))
        if not res.fatal and res.info.header_len:
            self._sizer.observe(name, 8 + res.info.header_len)
        return res

    def read_one(self, name: str, first: int = FIRST_RANGE) -> ShardRead:
        if self._probed is not None and name == "model.safetensors":
            return self._probed
        url = self._url(name)
        try:
            r = self.client.get(url, start=0, end=first - 1, limit=first)
        except RemoteError as e:
            if e.status == 416:  # empty file: "Content-Range: bytes */0"
                m = _UNSATISFIED.match(e.headers.get("Content-Range") or "") if e.headers is not None else None
                size = http_number(m.group(1)) if m is not None else None
                if size is not None:
                    return read_header(name, _RemoteBlob(self.client, url, size, b"", 0))
            return self._failed(name, e)
        self._pin(r.headers)
        try:
            if r.status == 206:
                first_byte, last, size = _content_range(r, 0)
                prefix = r.body[: last + 1]
            else:  # 200: the server ignored Range; only the first bytes of the body were read
                length = http_number(r.headers.get("Content-Length"))
                if length is not None:
                    size = length
                elif len(r.body) < first:
                    size = len(r.body)
                else:
                    raise RemoteError("the server ignored the Range request (HTTP 200) and sent no Content-Length, "
                                      "so the file size is unknown")
                prefix = r.body
        except RemoteError as e:
            return self._failed(name, e, received=len(r.body))
        direct = r.url if r.status == 206 else None
        return read_header(name, _RemoteBlob(self.client, url, size, prefix, len(r.body), direct))

    def _failed(self, name: str, e: RemoteError, received: int = 0) -> ShardRead:
        if e.status in (401, 403):
            why = f"cannot be fetched: {self._access_text(e)}"
        elif e.status == 404:
            why = "cannot be fetched: HTTP 404 Not Found (no such file in the repository)"
        else:
            why = f"cannot be fetched: {e.why}"
        res = ShardRead(info=ShardInfo(file=name, size=0, bytes_read=received), fatal=True, refused=True,
                        unreadable=why, missing=e.status == 404)
        res.issues.append(shard_finding(ShardUnreadable, name, why, None,
                                        hint="check the repository, revision and HF_TOKEN, then run the check again"))
        return res


    def _access_text(self, e: RemoteError) -> str:
        gated = (e.headers.get("X-Error-Code") == "GatedRepo") if e.headers is not None else False
        detail = self.client.redact(error_reason(e.headers))
        what = "a gated repository" if gated else "a gated or private repository"
        if self.client.token:
            return (f"access denied (HTTP {e.status}{detail}): {what}, and the token in HF_TOKEN does not give "
                    "access (accept the model's terms on its Hub page, or use a token with read access)")
        return (f"access denied (HTTP {e.status}{detail}): {what}; set HF_TOKEN to a Hugging Face token with read "
                "access (after accepting the model's terms on its Hub page)")


