"""Reading many shard headers in two processes.

Kept outside :mod:`ckptlint.reader` and light to import (the standard library only, until a
shard is read): ``ckptlint check DIR`` forks the reading child first thing (:func:`start_early`),
and the child and this process then import the reader each on its own core.

Parsing headers is CPU work (a typed JSON decode and column checks per shard), so on a
machine with a second core a forked child reads the later part of the shard list while this
process reads the first part. The child sends back only clean reads, in a compact form that
``marshal`` writes and reads in C (names, dtypes, shapes: the tensor tuples are rebuilt here in
bulk), through memory the two processes share (:data:`SHARED_CAP`; a pipe when that is not
available); any shard it did not read cleanly (a finding, an LFS pointer, an unreadable file) is read
again here, so every finding comes from the same code path as a serial read. If the child fails
in any way, this process reads its shards itself.

Used only where forking is safe and worth it: POSIX ``fork`` on Linux, at least two usable
CPUs with one of them idle (the load average: :func:`helps`), no other thread running in this
process, and enough shards. ``CKPTLINT_JOBS=1`` turns it off.
"""

from __future__ import annotations

import marshal
import operator
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ckptlint.reader.header import ShardRead

MIN_SHARDS = 16  # below this, a fork costs more than it saves
# Address space of the shared anonymous mapping the child writes its results into (made before the
# fork; a page costs memory only once written). Results are ~5 MB at DeepSeek-V3 scale (~50 MB for
# a million tensors); larger ones, or a system that refuses the mapping, go through the pipe. Through
# the pipe the parent copies them in 64 KiB turns with the child (8-10 ms for 5 MB on the 2-core
# benchmark machine, while the parent has nothing else to do); the mapping is read in place.
SHARED_CAP = 1 << 28
# Part of the shard list the child reads: this process meanwhile parses config.json and the index,
# reads the rest and unpacks the child's results (measured on the DeepSeek-V3 benchmark, 2 cores).
CHILD_SHARE = 0.7
# The same when reading starts before the command's own imports and setup (:func:`start_early`,
# ``Source.start``).
EARLY_CHILD_SHARE = 0.9


def jobs() -> int:
    """How many processes may read shards: 1 or 2."""
    env = os.environ.get("CKPTLINT_JOBS")
    if env is not None:
        try:
            return 2 if int(env) >= 2 and _can_fork() else 1
        except ValueError:
            return 1
    if not _can_fork():
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return 2 if helps(cpus, load) else 1


def helps(cpus: int, load: float) -> bool:
    """Whether a helper process would find a core to run on: at least two usable CPUs, and the
    1-minute load average (processes running or ready to run) leaving more than half a core idle
    beyond this process. Without one, the two processes share the cores with everything else and
    the fork, the transfer and the contention cost more than the helper saves: on the 2-core
    benchmark machine under load 3-5, the DeepSeek-V3-scale check took 2.27 s with the helper and
    1.48 s without (medians of 5; on a quiet machine 0.47 s and 0.49 s)."""
    return cpus >= 2 and load < cpus - 0.5


def _can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux") and threading.active_count() == 1


_MAGIC = "ckptlint-shards-1"
_UNREAPED: list[int] = []  # children that sent their results and are exiting


def _reap(block: bool = False) -> None:
    """Collect exited children (a child's exit, freeing its heap, is not waited for)."""
    for pid in list(_UNREAPED):
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _UNREAPED.remove(pid)


class Prefetch:
    """Shard headers being read by a forked child, started early (before the index is parsed)."""

    def __init__(self, read_one: Callable[[str], ShardRead], requested: list[str], names: list[str], pid: int,
                 fd: int, area: Any = None) -> None:
        self.read_one = read_one
        self.requested = requested  # the shard list asked for
        self.names = names  # the part the child reads
        self.pid = pid
        self.fd = fd
        self.area = area  # the shared mapping (mmap.mmap) or None
        self._results: dict[str, ShardRead] | None = None

    def results(self) -> dict[str, ShardRead]:
        """The child's reads (waiting for them); shards it did not read cleanly, or all of them if
        it failed, are read here."""
        if self._results is None:
            packed = None
            try:
                with os.fdopen(self.fd, "rb") as f:
                    data = f.read()  # to EOF: the child closes its end after writing everything
                doc = _received(data, self.area)
                if isinstance(doc, tuple) and len(doc) == 2 and doc[0] == _MAGIC:
                    packed = doc[1]
            except (OSError, ValueError, EOFError, TypeError, BufferError):
                packed = None
            self._release()
            _UNREAPED.append(self.pid)
            out: dict[str, ShardRead] = {}
            if isinstance(packed, list) and len(packed) == len(self.names):
                try:
                    for p, n in zip(packed, self.names):
                        out[n] = _unpack(p, n) if p is not None else self.read_one(n)
                except (ValueError, TypeError):
                    out = {}
            for n in self.names:
                if n not in out:
                    out[n] = self.read_one(n)
            self._results = out
            _reap()
        return self._results

    def _release(self) -> None:
        if self.area is not None:
            try:
                self.area.close()
            except BufferError:  # pragma: no cover - no view of it outlives _received
                pass
            self.area = None

    def close(self) -> None:
        """Stop a child whose results are not wanted (an early error): it is killed and collected."""
        if self._results is None:
            self._results = {}
            self._release()
            try:
                os.close(self.fd)
            except OSError:
                pass
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass


def prefetch(read_one: Callable[[str], ShardRead] | None, names: list[str], share: float | None = None,
             root: str | None = None) -> Prefetch | None:
    """Start a child reading the last ``share`` of ``names`` (default :data:`CHILD_SHARE`; None
    returned: not worth it, or not allowed): as shard files of the local directory ``root`` when
    given (clean headers as columns, what the child sends), else with ``read_one``. ``read_one``
    reads again here what the child did not read cleanly; it may be None with a ``root`` (the
    early start, before the reader is imported): whoever takes the results then sets
    :attr:`Prefetch.read_one` (:func:`take_early`)."""
    share = CHILD_SHARE if share is None else share
    _reap()
    if len(names) < max(MIN_SHARDS, 2) or jobs() < 2:
        return None
    theirs = names[len(names) - max(1, min(len(names) - 1, int(len(names) * share))):]
    try:
        r, w = os.pipe()
    except OSError:
        return None
    area = _shared_area()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        if area is not None:
            area.close()
        return None
    if pid == 0:  # pragma: no cover - runs in the child (exercised by tests through its output)
        code = 1
        try:
            import gc

            # Nothing the child allocates needs collecting before it exits, and a collection would
            # also walk (and so copy, page by page) every object it shares with the parent.
            gc.disable()
            os.close(r)
            reader = _local_reader(root) if root is not None else read_one
            assert reader is not None
            data = marshal.dumps((_MAGIC, [_pack(reader(n)) for n in theirs]))
            with os.fdopen(w, "wb") as f:
                f.write(_sent(data, area))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return Prefetch(read_one, list(names), theirs, pid, r, area)


def _shared_area() -> Any:
    """An anonymous mapping shared with a child forked after it (None: refused or unavailable)."""
    try:
        import mmap

        return mmap.mmap(-1, SHARED_CAP)
    except (ImportError, OSError, ValueError, OverflowError):
        return None


# What the child writes to the pipe: the length of its results in the shared mapping, or the results.
_IN_AREA, _INLINE = b"S", b"P"


def _sent(data: bytes, area: Any) -> bytes:
    """(child) Put ``data`` in the shared mapping when it fits; what to write to the pipe."""
    if area is not None and len(data) <= len(area):
        area[:len(data)] = data
        return _IN_AREA + len(data).to_bytes(8, "little")
    return _INLINE + data


def _received(msg: bytes, area: Any) -> object:
    """(parent) The child's results from what it wrote to the pipe (see :func:`_sent`)."""
    if msg[:1] == _IN_AREA and len(msg) == 9 and area is not None:
        n = int.from_bytes(msg[1:], "little")
        if n > len(area):
            raise ValueError("result size out of range")
        view = memoryview(area)
        try:
            return marshal.loads(view[:n])
        finally:
            view.release()
    if msg[:1] == _INLINE:
        return marshal.loads(memoryview(msg)[1:])
    raise ValueError("unexpected result message")


def _local_reader(root: str) -> Callable[[str], ShardRead]:
    from ckptlint.reader.header import read_shard

    # clean headers as columns: what _pack sends, without building the tensor map first
    return lambda name: read_shard(os.path.join(root, name), name, columns=True)


def shard_files(names) -> list[str]:
    """The ``.safetensors`` files among a directory's file names, sorted (the order they are read in)."""
    return sorted(n for n in names if n.endswith(".safetensors"))


# Directories whose shard headers started being read before the command line was parsed
# (``ckptlint._entry``); the loader takes the reading over for the directory it opens.
_EARLY: dict[str, Prefetch | None] = {}


def start_early(path: str) -> None:
    """Start reading the shard headers of directory ``path`` now, for a later :func:`take_early`
    (every shard file present: a checkpoint's shards are all read whatever its index says)."""
    if path in _EARLY or not os.path.isdir(path):
        return
    try:
        with os.scandir(path) as it:
            names = shard_files(e.name for e in it)
    except OSError:
        return  # reported when the checkpoint is loaded
    _EARLY[path] = prefetch(None, names, EARLY_CHILD_SHARE, root=path)


def take_early(path: str) -> tuple[bool, Prefetch | None]:
    """(whether ``path`` was started early, its reading child or None)."""
    if path not in _EARLY:
        return False, None
    return True, _EARLY.pop(path)


def close_early() -> None:
    """Release what no command took (a usage error, another path)."""
    while _EARLY:
        pre = _EARLY.popitem()[1]
        if pre is not None:
            pre.close()


def _pack(res: ShardRead) -> tuple | None:
    """A clean read as builtin values, or None (the parent reads that shard again)."""
    if res.issues or res.fatal or res.refused or res.lfs is not None or res.unreadable is not None \
            or res.missing or not (res.tensors or res.columns):
        return None
    i = res.info
    if res.columns is not None:
        names, dtypes, shapes = res.columns
    else:
        ts = res.tensors.values()
        names, dtypes, shapes = list(map(_NAME, ts)), list(map(_DTYPE, ts)), list(map(_SHAPE, ts))
    return (i.file, i.size, i.header_len, i.n_tensors, i.bytes_read, i.data_bytes, res.metadata, names, dtypes, shapes)


_NAME, _DTYPE, _SHAPE = (operator.itemgetter(i) for i in range(3))  # TensorInfo fields, read in C


def _unpack(p: tuple, name: str) -> ShardRead:
    from ckptlint.checkpoint import ShardInfo
    from ckptlint.reader.canonical import tensor_map
    from ckptlint.reader.header import ShardRead

    file, size, header_len, n_tensors, bytes_read, data_bytes, metadata, names, dtypes, shapes = p
    if file != name or not (len(names) == len(dtypes) == len(shapes) == n_tensors):
        raise ValueError(f"shard {name}: inconsistent result from the reading process")
    info = ShardInfo(file=file, size=size, header_len=header_len, n_tensors=n_tensors, bytes_read=bytes_read,
                     data_bytes=data_bytes)
    return ShardRead(info=info, tensors=tensor_map(names, dtypes, shapes, file), metadata=metadata)
