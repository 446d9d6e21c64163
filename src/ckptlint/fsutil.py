"""How ckptlint writes files: temp file in the same directory, fsync, rename (:func:`atomic_write`);
for a path the user named as an output, the same wherever a plain ``open(path, "wb")`` would write
(:func:`write_output`)."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def atomic_write(dest: str | Path, data: bytes) -> None:
    from pathlib import Path  # (here: a check imports nothing of pathlib's)

    dest = Path(dest)
    try:
        mode = dest.stat().st_mode & 0o7777  # keep the file's permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # what open() would have created
    import tempfile  # (here: only commands that write files need it)

    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent or ".")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_output(dest: str | Path, data: bytes) -> None:
    """Write a file the user named (``--output``, ``--write-baseline``) where ``open(dest, "wb")``
    would write, but atomically where that is possible.

    A device, pipe or socket (``/dev/null``, ``/dev/stdout``, a FIFO) is written to and never
    replaced; a symbolic link is kept and the file it points to is replaced; a regular or new file
    is replaced atomically (:func:`atomic_write`). Raises OSError when it cannot be written.
    """
    path = os.fspath(dest)
    try:
        st = os.stat(path)  # follows symbolic links
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        with open(path, "wb") as fh:
            fh.write(data)
        return
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", path)
    atomic_write(os.path.realpath(path), data)


# --- reading files a checkpoint (or a user) supplies, with a size cap ------------------------------

_O_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class FileRefused(OSError):
    """A file :func:`read_capped` / :func:`open_regular` will not read. ``why`` completes a sentence
    about the file: "is a FIFO, not a regular file", "is 3,221,225,472 bytes, more than the ...".
    Other ``OSError``\\ s (not found, permission denied) pass through unchanged."""

    def __init__(self, path: str, why: str, *, too_large: bool = False) -> None:
        super().__init__(why)
        self.path = path
        self.why = why
        self.too_large = too_large  # (else: not a regular file)


def not_regular(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file ("a FIFO"), else None."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """Open a regular file for reading: ``(fd, fstat)``; the caller closes ``fd``.

    Opened non-blocking, so a FIFO (also behind a symbolic link, or swapped in after a check)
    cannot stall the open; what was opened is then checked with ``fstat``, so a FIFO, a device
    (``/dev/zero``) or a socket is refused before a byte is read.
    """
    p = os.fspath(path)
    fd = os.open(p, _O_READ)
    try:
        st = os.fstat(fd)
        kind = not_regular(st.st_mode)
        if kind is not None:
            raise FileRefused(p, f"is {kind}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_package_file(path: str) -> bytes:
    """The bytes of one of ckptlint's own data files (target and GPU data): no caps, they ship with it."""
    with open(path, "rb") as fh:
        return fh.read()


def read_capped(path: str | os.PathLike[str], cap: int) -> bytes:
    """The bytes of the regular file ``path``, refused (:class:`FileRefused`) when it holds more
    than ``cap`` bytes.

    Not a regular file: refused before reading (see :func:`open_regular`). Larger than ``cap``:
    refused from its size, without reading it (a sparse multi-GB file costs nothing). A file that
    grows while being read is read to ``cap + 1`` bytes at most, then refused.
    """
    fd, st = open_regular(path)
    try:
        if st.st_size > cap:
            raise FileRefused(os.fspath(path), f"is {st.st_size:,} bytes, more than the {cap:,} that ckptlint reads",
                              too_large=True)
        chunks: list[bytes] = []
        total = 0
        while total <= cap:  # one read of the whole file, one more to see its end
            chunk = os.read(fd, min(max(st.st_size + 1 - total, 1 << 16), cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            raise FileRefused(os.fspath(path), f"grew to more than the {cap:,} bytes that ckptlint reads",
                              too_large=True)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)
