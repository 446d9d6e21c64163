"""Build a :class:`~ckptlint.checkpoint.Checkpoint` from a directory or a single file.

What is read, and in which mode:

* a directory with a usable ``model.safetensors.index.json`` (its ``weight_map`` is an object
  of strings): the shards the index names — as frameworks do. ``.safetensors`` files the index
  does not name are read too, but only to describe them in a hygiene finding (IX209); their
  tensors are *not* added to ``Checkpoint.tensors``.
* a directory without an index, or with an index frameworks cannot use (IX201/IX202, a
  load error already): every ``*.safetensors`` file in the directory, sorted by name.
* a single ``.safetensors`` file: that file, plus ``config.json``/``hf_quant_config.json``
  beside it if present (no finding when they are absent: a container-only check).

Names the index gives are looked up in the directory listing and never used as paths unless
they are plain file names that are listed there; shards that are symlinks are followed.

When the same tensor name is in two read shards, ``Checkpoint.tensors`` keeps the copy from the
later file in name order (frameworks read every file and the last copy written wins).
A shard whose header cannot be parsed contributes no tensors; a shard with a parsed header
but a bad layout (offsets, sizes, truncation) still contributes its well-formed entries, so
later rules can reason about names, while the load error is reported by an SF finding.
"""

from __future__ import annotations

import gc
import os
import stat as stat_mod
from typing import Any

from ckptlint.checkpoint import Checkpoint
from ckptlint.reader.configs import read_configs
from ckptlint.reader.fileset import compare_index, missing_shards, no_weights, report_dups, unreferenced_shard
from ckptlint.reader.header import ShardRead, lfs_finding, read_shard
from ckptlint.reader.index import bad_shard_name, bad_shard_names, check_total_size, read_index
from ckptlint.reader.jsonfiles import MAX_KEPT_TEXT
from ckptlint.reader.names import CONFIG_NAME, HF_SCHEME, INDEX_NAME, QUANT_CONFIG_NAME
from ckptlint.reader.source import LocalDir, NotACheckpoint, Source, shard_files, take_early

__all__ = ["CONFIG_NAME", "INDEX_NAME", "QUANT_CONFIG_NAME", "NotACheckpoint", "load_checkpoint", "open_path"]


def open_path(path: str | os.PathLike[str], *, endpoint: str | None = None,
              progress: bool = False) -> str | Source:
    """What :func:`load_checkpoint` should read for ``path``, with reading options attached:
    a :class:`Source` for ``hf://`` repositories and local directories, else the path itself
    (a single file, or something that is not a checkpoint: reported when it is loaded).
    Cheap: nothing is read or fetched here."""
    p = os.fspath(path)
    if p.startswith(HF_SCHEME):
        from ckptlint.reader.remote import HubRepo

        return HubRepo(p, endpoint=endpoint, progress=progress)
    if os.path.isdir(p):
        early = take_early(p)
        if early is not None:
            early.progress = progress
            return early
        return LocalDir(p, progress=progress)
    return p


def load_checkpoint(path: str | os.PathLike[str] | Source, *, endpoint: str | None = None,
                    progress: bool = False) -> Checkpoint:
    """Read ``path`` into a Checkpoint: a checkpoint directory, one ``.safetensors`` file, a
    Hugging Face repository ``hf://ORG/REPO[@REVISION]``, or a :class:`Source` (see
    :func:`open_path`).

    Never reads tensor data. Every problem with the input becomes a Finding in
    ``Checkpoint.issues``; only unusable input raises :class:`NotACheckpoint`.
    ``endpoint`` overrides ``HF_ENDPOINT`` for ``hf://`` paths; ``progress`` shows a progress
    line on stderr when it is a terminal (remote checks, or local ones with many shards).
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # many small dicts/lists: collection passes would dominate the run time
    try:
        if isinstance(path, Source):
            return _load_dir(path)
        p = os.fspath(path)
        if p.startswith(HF_SCHEME):
            return _load_dir(open_path(p, endpoint=endpoint, progress=progress))  # type: ignore[arg-type]
        return _load(p, progress)
    finally:
        if gc_was_enabled:
            gc.enable()


def _load(p: str, progress: bool = False) -> Checkpoint:
    try:
        st = os.stat(p)
    except OSError as e:
        if os.path.islink(p):
            raise NotACheckpoint(f"{p}: broken symlink") from None
        raise NotACheckpoint(f"{p}: {e.strerror or 'cannot be read'}") from None
    if stat_mod.S_ISDIR(st.st_mode):
        return _load_dir(LocalDir(p, progress=progress))
    if not p.endswith(".safetensors"):
        raise NotACheckpoint(f"{p}: not a checkpoint directory or a .safetensors file")
    return _load_file(p, st)


# --------------------------------------------------------------------------- single file


def _load_file(p: str, st: os.stat_result) -> Checkpoint:
    ck = Checkpoint(root=p, is_single_file=True)
    d = os.path.dirname(p) or "."
    rel = os.path.basename(p)
    read_configs(ck, LocalDir(d), lambda name: os.path.lexists(os.path.join(d, name)), require_config=False)
    res = read_shard(p, rel, st)
    _collect(ck, {rel: res}, None)
    return ck


# --------------------------------------------------------------------------- directory


def _load_dir(src: Source) -> Checkpoint:
    p = src.root
    names = src.names()
    st_names = shard_files(names)
    has_index = INDEX_NAME in names
    if CONFIG_NAME not in names and not has_index and not st_names:
        raise NotACheckpoint(f"{p}: no config.json and no .safetensors files: not a checkpoint directory")
    ck = Checkpoint(root=p)
    if src.complete:
        # Every shard file present is read, whatever the index says: start now, in parallel with
        # parsing config.json and the index where the source can.
        src.prefetch(st_names)
    try:
        _read_dir(ck, src, names, st_names, has_index)
    finally:
        src.close()
    return ck


def _read_dir(ck: Checkpoint, src: Source, names: set[str], st_names: list[str], has_index: bool) -> None:
    read_configs(ck, src, names.__contains__, require_config=True)

    weight_map: dict[str, str] | None = None
    if has_index:
        ck.index_file = INDEX_NAME
        weight_map = read_index(ck, src.read_json(INDEX_NAME))

    if weight_map is None:
        reads = src.read_shards(st_names)
        _collect(ck, reads, None)
        if not st_names:
            no_weights(ck, names)
        return

    # index mode
    values = set(weight_map.values())
    by_shard: dict[str, list[str]] | None = None

    def mapped(shard: str) -> list[str]:
        nonlocal by_shard
        if by_shard is None:
            by_shard = {}
            for t, s in weight_map.items():
                by_shard.setdefault(s, []).append(t)
        return by_shard.get(shard, [])

    referenced: list[str] = []
    bad: list[tuple[str, str]] = []
    missing: list[str] = []
    for v in sorted(values):
        why = bad_shard_name(v)
        if why is not None:
            bad.append((v, why))
        elif v not in names and src.complete:
            missing.append(v)
        else:
            referenced.append(v)
    bad_shard_names(ck, bad, mapped)
    unreferenced = [n for n in st_names if n not in values]
    all_reads = src.read_shards(referenced + unreferenced)
    reads: dict[str, ShardRead] = {}
    for v in referenced:
        r = all_reads[v]
        if r.missing:  # a source that could not list its files learns it only now
            missing.append(v)
        else:
            reads[v] = r
    missing_shards(ck, missing, mapped)
    blocked = {v for v, _ in bad}.union(missing)  # named by the index but not read
    _collect(ck, reads, weight_map)

    # .safetensors files the index does not name: frameworks skip them
    unref_tensors: dict[str, str] = {}
    for n in unreferenced:
        r = all_reads[n]
        for t in r.tensors:
            unref_tensors.setdefault(t, n)
        unreferenced_shard(ck, n, r)

    compare_index(ck, weight_map, reads, unref_tensors)
    check_total_size(ck, reads, blocked)
    if not values and not st_names:
        no_weights(ck, names)
    _slim(ck)


def _slim(ck: Checkpoint) -> None:
    """Drop what was only needed to compare the index with the headers."""
    if isinstance(ck.index, dict) and "weight_map" in ck.index:
        wm = ck.index["weight_map"]
        ck.index = {k: v for k, v in ck.index.items() if k != "weight_map"}
        ck.index["weight_map_entries"] = len(wm) if isinstance(wm, dict) else None
    length = ck.texts.length(INDEX_NAME)
    if length is not None and length > MAX_KEPT_TEXT:
        del ck.texts[INDEX_NAME]


# --------------------------------------------------------------------------- shards


def _collect(ck: Checkpoint, reads: dict[str, ShardRead], weight_map: dict[str, str] | None) -> None:
    """Merge shard reads into ``ck`` (in name order); report LFS pointers and duplicates."""
    tensors = ck.tensors
    lfs: list[tuple[str, dict[str, Any]]] = []
    dups: dict[str, list[str]] = {}
    before = len(tensors)
    merged = 0
    order = sorted(reads)
    for name in order:
        r = reads[name]
        ck.shards[name] = r.info
        ck.issues.extend(r.issues)
        if r.lfs is not None:
            lfs.append((name, r.lfs))
            continue
        st = r.tensors
        if st:
            tensors.update(st)  # the later file's copy wins
            merged += len(st)
    if len(tensors) != before + merged:
        # a tensor in two shards: which ones (rare, so found again only now)
        seen: dict[str, str] = {}
        for name in order:
            for t in reads[name].tensors if reads[name].lfs is None else ():
                if t in seen:
                    dups.setdefault(t, [seen[t]]).append(name)
                seen[t] = name
    if lfs:
        ck.issues.append(lfs_finding(lfs, weight_map))
    if dups:
        report_dups(ck, dups, reads)
