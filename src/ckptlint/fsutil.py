"""How ckptlint writes files: temp file in the same directory, fsync, rename (:func:`atomic_write`);
for a path the user named as an output, the same wherever a plain ``open(path, "wb")`` would write
(:func:`write_output`)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def atomic_write(dest: str | Path, data: bytes) -> None:
    dest = Path(dest)
    try:
        mode = dest.stat().st_mode & 0o7777  # keep the file's permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # what open() would have created
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
