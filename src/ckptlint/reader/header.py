"""Read one safetensors header without touching tensor data: the framing of the file.

Layout: 8-byte little-endian u64 ``N``, then ``N`` bytes of UTF-8 JSON, then the data buffer.
This module reads the length and the header bytes and reports what stops it there (a file too
small, a length over the cap or past the end, a Git LFS pointer, a file that cannot be read);
:mod:`ckptlint.reader.parse` parses and validates the header it read.

Bytes read per file: at most ``8 + N`` (or 1,024 for a Git LFS pointer / tiny file).

The rules (SF101-SF103, SF116, SF117) are declared in :mod:`ckptlint.rules.shard_file`.
"""

from __future__ import annotations

import os
import stat as stat_mod
from dataclasses import dataclass, field
from typing import Any, Protocol

from ckptlint.checkpoint import ShardInfo, TensorInfo
from ckptlint.findings import Finding
from ckptlint.fsutil import FileRefused, open_regular
from ckptlint.reader.parse import parse_header
from ckptlint.reader.report import LFS_HINT, LOAD, listed, shard_finding
from ckptlint.rules.shard_file import (ST_HEADER_LENGTH, ST_IS_DIR, ST_NOT_FOUND, ST_TOO_LARGE, ST_TOO_SMALL,
                                       GitLfsPointer, ShardHeaderBeyondFile, ShardHeaderTooLarge, ShardTooSmall,
                                       ShardUnreadable)

__all__ = ["ByteSource", "ShardInfo", "ShardRead", "read_header", "read_shard", "parse_lfs_pointer"]

MAX_HEADER = 100_000_000
# A header longer than this is first checked for holes (sparse files) before it is read.
HOLE_CHECK_MIN = 1 << 20
_SEEK_HOLE = getattr(os, "SEEK_HOLE", None)
LFS_MAGIC = b"version https://git-lfs.github.com/spec/v1"
LFS_READ = 1024


@dataclass
class ShardRead:
    info: ShardInfo
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    issues: list[Finding] = field(default_factory=list)
    fatal: bool = False  # the header could not be parsed at all: no tensors
    refused: bool = False  # safetensors would refuse to open this file
    lfs: dict[str, Any] | None = None  # Git LFS pointer: {"oid":..., "size":...}
    unreadable: str | None = None  # why the file could not be read at all
    missing: bool = False  # the source found no such file (a remote 404); the loader reports IX204
    metadata: dict[str, str] | None = None
    # a clean header read for the shard-reading child: (names, dtypes, shapes) instead of ``tensors``
    columns: tuple[list[str], list[str], list[tuple[int, ...]]] | None = None


def _read_exact(f: Any, n: int) -> bytes:
    chunks = []
    left = n
    while left > 0:
        b = f.read(left)
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def parse_lfs_pointer(data: bytes) -> dict[str, Any] | None:
    """Return ``{"oid": ..., "size": ...}`` if ``data`` is a Git LFS pointer file, else None."""
    if not data.startswith(LFS_MAGIC):
        return None
    out: dict[str, Any] = {}
    for line in data.decode("utf-8", "replace").splitlines()[1:]:
        key, _, value = line.partition(" ")
        if key == "oid":
            out["oid"] = value.strip()
        elif key == "size" and value.strip().isascii() and value.strip().isdigit():
            out["size"] = int(value.strip())
    return out


def lfs_finding(lfs: list[tuple[str, dict[str, Any]]], weight_map: dict[str, str] | None) -> Finding:
    """One finding for every shard of the checkpoint that is a Git LFS pointer."""
    files = [f for f, _ in lfs]
    names = ", ".join(files[:5]) + (f", ... ({len(files)} files)" if len(files) > 5 else "")
    pointers = set(files)
    mapped = [t for t, s in (weight_map or {}).items() if s in pointers]
    return Finding(
        code=GitLfsPointer.code, name=GitLfsPointer.name, consequence=LOAD, file=files[0], tensors=mapped,
        message=f"{names}: Git LFS pointer file(s), not weights: the weights were never downloaded "
                "(a clone without `git lfs`, or `actions/checkout` without `lfs: true`)",
        hint=LFS_HINT, error_text=ST_TOO_LARGE,
        data={"files": listed({f: info for f, info in lfs}), "file_count": len(lfs), "safetensors_error": "HeaderTooLarge"})


class ByteSource(Protocol):
    """What :func:`read_header` reads from: a file of known ``size`` read by byte ranges.

    ``read(offset, length)`` returns at most ``length`` bytes (fewer only at the end of the
    data) and raises ``OSError`` when the bytes cannot be had; ``bytes_read`` counts the bytes
    actually received (for a remote file: every byte that came over the wire).
    """

    size: int
    bytes_read: int

    def read(self, offset: int, length: int) -> bytes: ...


class _LocalFile:
    """A local file as a :class:`ByteSource` (sequential reads; seeks only if asked)."""

    __slots__ = ("f", "size", "bytes_read", "pos")

    def __init__(self, f: Any, size: int) -> None:
        self.f, self.size, self.bytes_read, self.pos = f, size, 0, 0

    def read(self, offset: int, length: int) -> bytes:
        if offset != self.pos:
            self.f.seek(offset)
        b = _read_exact(self.f, length)
        self.pos = offset + len(b)
        self.bytes_read += len(b)
        return b

    def hole_at(self, offset: int) -> int:
        """Where the first hole at or after ``offset`` begins (the file's size if none): a sparse
        file's hole reads as zero bytes without being stored."""
        try:
            hole = os.lseek(self.f.fileno(), offset, _SEEK_HOLE)
        except OSError:  # the file system cannot tell
            return self.size
        self.pos = -1  # (the file position moved)
        return hole


def read_shard(path: str, rel: str, st: os.stat_result | None = None, columns: bool = False) -> ShardRead:
    """Read the header of the safetensors file at ``path`` (``rel``: name for messages);
    ``columns``: see :func:`ckptlint.reader.parse.parse_header`."""
    try:
        if st is None:
            st = os.stat(path)
    except OSError as e:
        why = "is a broken symlink" if os.path.islink(path) else f"cannot be read ({e.strerror})"
        return _unreadable(rel, why, ST_NOT_FOUND.format(path=rel))
    if stat_mod.S_ISDIR(st.st_mode):
        return _unreadable(rel, "is a directory, not a file", ST_IS_DIR)
    if not stat_mod.S_ISREG(st.st_mode):
        return _unreadable(rel, "is not a regular file", None)
    try:
        fd, st = open_regular(path)  # (what was opened: a FIFO swapped in since the stat never blocks)
    except FileRefused:
        return _unreadable(rel, "is not a regular file", None)
    except OSError as e:
        return _unreadable(rel, f"cannot be read ({e.strerror or e})", str(e))
    with open(fd, "rb", buffering=0) as f:
        return read_header(rel, _LocalFile(f, st.st_size), columns)


def read_header(rel: str, src: ByteSource, columns: bool = False) -> ShardRead:
    """Read and validate the header of one safetensors file from ``src`` (local or remote).

    Reads ``[0, 8)``, then (for a Git LFS pointer) ``[8, 1024)`` or the header ``[8, 8 + N)``;
    never the data buffer. An ``OSError`` from ``src`` becomes an SF117 (unreadable) finding
    whose text is the error's ``why`` attribute when it has one.
    """
    res = ShardRead(info=ShardInfo(file=rel, size=src.size))
    try:
        try:
            raw = _read_framed(rel, src, res)
        finally:
            res.info.bytes_read = src.bytes_read
    except OSError as e:
        why = getattr(e, "why", None) or f"cannot be read ({e.strerror or e})"
        out = _unreadable(rel, why, getattr(e, "error_text", str(e)))
        out.info.bytes_read = src.bytes_read
        return out
    if raw is None:
        return res
    raw, wanted = raw
    n = res.info.header_len
    if len(raw) < wanted:  # the file shrank while we read it
        res.fatal = res.refused = True
        res.issues.append(shard_finding(ShardHeaderBeyondFile, rel, f"file ended after {len(raw):,} of {n:,} header bytes",
                                        ST_HEADER_LENGTH))
        return res
    if wanted < n:
        raw += b"\0"  # the first byte of the hole
    parse_header(raw, n, src.size, rel, res, columns)
    return res


def _read_framed(rel: str, src: ByteSource, res: ShardRead) -> tuple[bytes, int] | None:
    """The header bytes ``[8, 8 + N)`` (or those before a hole in it, see below) and how many were
    asked for; None when the framing already decided (reported in ``res``)."""
    size = src.size
    head = src.read(0, 8)
    if len(head) < 8:
        res.fatal = res.refused = True
        what = "is empty (0 bytes)" if not head else f"is only {len(head)} bytes long"
        res.issues.append(shard_finding(ShardTooSmall, rel, f"{what}; a safetensors file starts with an 8-byte header length",
                                        ST_TOO_SMALL, hint="re-download or re-export this file"))
        return None
    if head == LFS_MAGIC[:8]:
        rest = src.read(8, LFS_READ - 8)
        lfs = parse_lfs_pointer(head + rest)
        if lfs is not None:
            res.lfs = lfs
            res.fatal = res.refused = True
            return None
    n = int.from_bytes(head, "little")
    if n > MAX_HEADER:
        res.fatal = res.refused = True
        res.issues.append(_too_large(rel, n, size))
        return None
    res.info.header_len = n
    if 8 + n > size:
        res.fatal = res.refused = True
        res.issues.append(shard_finding(ShardHeaderBeyondFile, rel,
                                        f"header length field claims {n:,} bytes but the file has only {size:,} bytes "
                                        "(truncated inside the header)", ST_HEADER_LENGTH,
                                        data={"header_len": n, "size": size}, hint="re-download or re-export this file"))
        return None
    hole_at = getattr(src, "hole_at", None)
    if n > HOLE_CHECK_MIN and hole_at is not None and _SEEK_HOLE is not None:
        hole = hole_at(8)
        if hole < 8 + n:
            # The header runs into a hole: zero bytes, which JSON never contains. The bytes before
            # the first one decide the finding (the parse fails at or before it), so only those are
            # read, not up to 100 MB of zeros.
            return src.read(8, hole - 8), hole - 8
    return src.read(8, n), n


def _too_large(rel: str, n: int, size: int) -> Finding:
    """SF102. The claimed length is quoted only when a header that long would fit in the file: the
    first 8 bytes of something else (a symlinked shard pointing at a private file, text) would
    otherwise be printed as a number."""
    if 8 + n <= size:
        what, data = f"header length field claims {n:,} bytes, over the 100,000,000-byte limit", {"header_len": n}
    else:
        what, data = "header length field claims more than the 100,000,000-byte limit and more than the file holds", {}
    return shard_finding(ShardHeaderTooLarge, rel, f"{what} (not a safetensors file, or a corrupted one)", ST_TOO_LARGE,
                         data=data, hint="re-download or re-export this file")


def _unreadable(rel: str, why: str, error_text: str | None) -> ShardRead:
    res = ShardRead(info=ShardInfo(file=rel, size=0), fatal=True, refused=True, unreadable=why)
    res.issues.append(shard_finding(ShardUnreadable, rel, why, error_text,
                                    hint="replace it with the real safetensors file (re-download or re-export)"))
    return res
