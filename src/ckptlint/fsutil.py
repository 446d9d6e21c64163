"""The one way ckptlint writes a file: temp file in the same directory, fsync, rename."""

from __future__ import annotations

import os
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
