"""What a remote check is told by its user: the ``hf://`` name, the endpoint, the token, the timeout.

Each is checked before anything is sent, and one that cannot work is a usage error
(:class:`RemoteUnavailable`, exit 2) whose message never shows a credential.
"""

from __future__ import annotations

import math
import os
import re
import urllib.parse

from ckptlint.reader.hubhttp import clean, redact
from ckptlint.reader.names import HF_SCHEME
from ckptlint.reader.source import NotACheckpoint

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_REVISION = "main"
DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 3600.0
MAX_REPO_ID = 96  # the Hub's limit on ORG/NAME
MAX_REVISION = 255
_TRUE = {"1", "on", "yes", "true"}
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TOKEN = re.compile(r"^[\x21-\x7e]{1,4096}$")
_HOST_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")


class RemoteUnavailable(NotACheckpoint):
    """The repository cannot be read at all (offline, not found, access denied, unreachable, unusable settings)."""


def offline() -> bool:
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _shown(url: str) -> str:
    return clean(url, 120)


def parse_hf_url(url: str) -> tuple[str, str | None]:
    """``hf://ORG/REPO[@REVISION]`` -> (``ORG/REPO``, revision or None)."""
    rest = url[len(HF_SCHEME):] if url.startswith(HF_SCHEME) else url
    repo, at, rev = rest.partition("@")
    repo = repo.strip("/")
    parts = repo.split("/")
    if not 1 <= len(parts) <= 2 or not all(_SEGMENT.match(p) and ".." not in p for p in parts):
        raise RemoteUnavailable(f"{_shown(url)}: not a Hugging Face model repository: expected hf://ORG/REPO[@REVISION]")
    if len(repo) > MAX_REPO_ID:
        raise RemoteUnavailable(f"{_shown(url)}: the repository id is {len(repo):,} characters long; Hugging Face "
                                f"repository ids (ORG/NAME) have at most {MAX_REPO_ID}")
    if at and (not rev or rev.startswith("/") or ".." in rev.split("/") or any(c in rev for c in "\\?#")
               or re.search(r"[\x00-\x20\x7f]", rev)):
        raise RemoteUnavailable(f"{_shown(url)}: bad revision {clean(rev, 80)!r} (a branch, tag or commit id)")
    if len(rev) > MAX_REVISION:
        raise RemoteUnavailable(f"{_shown(url)}: the revision is {len(rev):,} characters long (at most {MAX_REVISION})")
    return repo, (rev or None)


def token() -> str | None:
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        v = os.environ.get(k, "").strip()
        if v:
            if not _TOKEN.match(v):
                raise RemoteUnavailable(
                    f"{k} is not a usable token: it contains a space, a line break, a control or non-ASCII character, "
                    "or is over 4096 characters (its value is not shown); set it to the token alone")
            return v
    return None


def timeout() -> float:
    raw = os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        t = float(raw)
    except ValueError:
        t = math.nan
    if not (math.isfinite(t) and 0 < t <= MAX_TIMEOUT):
        raise RemoteUnavailable(f"HF_HUB_DOWNLOAD_TIMEOUT={clean(raw, 40)!r} is not a usable timeout: give a number of "
                                f"seconds above 0 and at most {MAX_TIMEOUT:g}")
    return t


def endpoint(given: str | None) -> str:
    which = "--endpoint" if given else "HF_ENDPOINT"
    ep = (given or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    shown = clean(redact(ep), 120)

    def bad(why: str) -> RemoteUnavailable:
        return RemoteUnavailable(f"endpoint {shown!r} ({which}) is not usable: {why}")

    if len(ep) > 2048 or re.search(r"[\x00-\x20\x7f]", ep):
        raise bad("an http(s) URL has no spaces or control characters and is at most 2048 characters long")
    try:
        u = urllib.parse.urlsplit(ep)
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise bad(f"not a URL ({clean(e, 80)})") from None
    if u.scheme.lower() not in ("http", "https") or not u.hostname:
        raise bad("expected http(s)://HOST[:PORT][/PATH]")
    if u.username is not None or u.password is not None:
        raise bad("credentials in the URL are not sent; set HF_TOKEN instead")
    if u.query or u.fragment or "?" in ep or "#" in ep:
        raise bad("expected http(s)://HOST[:PORT][/PATH], without ?query or #fragment")
    if not _host_ok(u.hostname):
        raise bad("the host name is not valid")
    return ep


def _host_ok(host: str) -> bool:
    if ":" in host:  # an IPv6 literal (urlsplit checked the brackets)
        import ipaddress

        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
            return True
        except ValueError:
            return False
    try:
        ascii_host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        return False
    return len(ascii_host) <= 253 and all(_HOST_LABEL.match(p) for p in ascii_host.rstrip(".").split("."))
