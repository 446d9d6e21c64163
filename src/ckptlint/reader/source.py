"""Where a checkpoint directory's files come from: a local directory or a remote repository.

The loader (:mod:`ckptlint.reader.loader`) asks a source for four things and does all the
validation itself, so a local directory and a Hugging Face repository give the same findings:

* ``names()``: the file names at the top level (``complete`` says whether that list is
  authoritative: a remote source that could not list the repository only knows the files it
  probed, and reports a missing shard when reading it fails with "not found");
* ``read_json(name)``: the bytes of a JSON side file, parsed (:class:`JsonRead`);
* ``read_shards(names)``: each shard's header (:func:`~ckptlint.reader.header.read_header`
  on a :class:`~ckptlint.reader.header.ByteSource`), as ``{name: ShardRead}``.

The remote source is :class:`ckptlint.reader.remote.HubRepo`.
"""

from __future__ import annotations

import os
from typing import Iterable

from ckptlint import forkread
from ckptlint.forkread import EARLY_CHILD_SHARE, prefetch, shard_files
from ckptlint.progress import progress_for
from ckptlint.reader.header import ShardRead, read_shard
from ckptlint.reader.jsonfiles import CONFIG_CAP, INDEX_CAP, MAX_KEPT_TEXT, JsonRead, read_json
from ckptlint.reader.names import INDEX_NAME

LOCAL_PROGRESS_MIN_SHARDS = 20


class NotACheckpoint(Exception):
    """The input is not something ckptlint can check at all (exit 2)."""


class Source:
    root: str  # as the user gave it; Checkpoint.root
    complete: bool = True
    progress: bool = False  # show a progress line on stderr (a terminal) while reading shards
    progress_min_shards: int = LOCAL_PROGRESS_MIN_SHARDS

    def names(self) -> set[str]:  # pragma: no cover - interface
        raise NotImplementedError

    def read_json(self, name: str) -> JsonRead:  # pragma: no cover - interface
        raise NotImplementedError

    def read_one(self, name: str) -> ShardRead:  # pragma: no cover - interface
        raise NotImplementedError

    def _map(self, fn, names: list[str]):
        """How shards are read: one after the other (a remote source reads them concurrently)."""
        return map(fn, names)

    def prefetch(self, names: list[str], share: float | None = None) -> None:
        """Start reading these shards in the background if the source can (see LocalDir)."""

    def start(self) -> None:
        """Start reading in the background whatever a load will read, if the source can."""

    def close(self) -> None:
        """Release what :meth:`prefetch` started and :meth:`read_shards` did not collect."""

    def __enter__(self) -> "Source":
        """``with source:`` starts reading in the background (:meth:`start`) and releases it at the end."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_shards(self, names: Iterable[str]) -> dict[str, ShardRead]:
        todo = list(names)
        bar = progress_for(self.progress and len(todo) >= self.progress_min_shards, len(todo),
                           f"{self.root}: reading shard headers")
        out: dict[str, ShardRead] = {}
        try:
            for n, res in zip(todo, self._map(self.read_one, todo)):
                out[n] = res
                if bar is not None:
                    bar.advance()
        finally:
            if bar is not None:
                bar.close()
        return out


class LocalDir(Source):
    """A checkpoint directory on disk (shards that are symlinks are followed)."""

    def __init__(self, path: str, *, progress: bool = False) -> None:
        self.root = path
        self.progress = progress
        self._names: set[str] | None = None
        self._prefetch = None  # ckptlint.forkread.Prefetch

    def names(self) -> set[str]:
        if self._names is None:
            try:
                with os.scandir(self.root) as it:
                    self._names = {e.name for e in it}
            except OSError as e:
                raise NotACheckpoint(f"{self.root}: cannot list directory ({e.strerror})") from None
        return self._names

    def read_json(self, name: str) -> JsonRead:
        if name == INDEX_NAME:
            return read_json(os.path.join(self.root, name), INDEX_CAP, tuple(shard_files(self.names())), MAX_KEPT_TEXT)
        return read_json(os.path.join(self.root, name), CONFIG_CAP)

    def read_one(self, name: str) -> ShardRead:
        return read_shard(os.path.join(self.root, name), name)

    def prefetch(self, names: list[str], share: float | None = None) -> None:
        if self._prefetch is not None and self._prefetch.requested == names:
            return  # already started (by start())
        self.close()
        self._prefetch = prefetch(self.read_one, names, share, root=self.root)

    def start(self) -> None:
        """Start reading every shard header of the directory now, before the caller's own setup
        (imports, configuration): a checkpoint's shards are all read whatever its index says."""
        try:
            names = shard_files(self.names())
        except NotACheckpoint:
            return  # reported when the checkpoint is loaded
        self.prefetch(names, EARLY_CHILD_SHARE)

    def close(self) -> None:
        if self._prefetch is not None:
            self._prefetch.close()
            self._prefetch = None

    def _map(self, fn, names: list[str]):
        pre = self._prefetch
        if pre is None:
            return map(fn, names)
        theirs = set(pre.names)
        mine = {n: fn(n) for n in names if n not in theirs}
        done = pre.results()
        return (mine[n] if n in mine else done[n] for n in names)


def take_early(path: str) -> LocalDir | None:
    """The directory ``path`` as a source whose shard headers started being read before the command
    line was parsed (:func:`ckptlint.forkread.start_early`), or None."""
    started, pre = forkread.take_early(path)
    if not started:
        return None
    src = LocalDir(path)
    if pre is not None:
        pre.read_one = src.read_one
        src._prefetch = pre
    return src
