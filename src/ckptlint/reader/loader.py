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
from itertools import repeat
from operator import eq
import stat as stat_mod
from typing import Any, Callable

from ckptlint.checkpoint import Checkpoint
from ckptlint.findings import Consequence, Finding
from ckptlint.reader import codes as C
from ckptlint.reader.header import ShardRead, read_shard
from ckptlint.reader.jsonfiles import JsonRead, jtype
from ckptlint.reader.names import CONFIG_NAME, HF_SCHEME, INDEX_NAME, QUANT_CONFIG_NAME
from ckptlint.reader.source import LocalDir, NotACheckpoint, Source, shard_files, take_early

OTHER_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".npz")
LOAD = Consequence.LOAD_ERROR
HYGIENE = Consequence.HYGIENE
SILENT = Consequence.SILENT_CORRUPTION


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


def _finding(code: str, consequence: Consequence, file: str | None, what: str, **kw: Any) -> Finding:
    message = f"{file}: {what}" if file else what
    return Finding(code=code, consequence=consequence, message=message, file=file, **kw)


# --------------------------------------------------------------------------- single file


def _load_file(p: str, st: os.stat_result) -> Checkpoint:
    ck = Checkpoint(root=p, is_single_file=True)
    d = os.path.dirname(p) or "."
    rel = os.path.basename(p)
    _read_configs(ck, LocalDir(d), lambda name: os.path.lexists(os.path.join(d, name)), require_config=False)
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
    _read_configs(ck, src, names.__contains__, require_config=True)

    weight_map: dict[str, str] | None = None
    if has_index:
        ck.index_file = INDEX_NAME
        weight_map = _read_index(ck, src.read_json(INDEX_NAME))

    if weight_map is None:
        reads = src.read_shards(st_names)
        _collect(ck, reads, None)
        if not st_names:
            _no_weights(ck, names)
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
    blocked: set[str] = set()  # named by the index but not read (bad name or missing)
    for v in sorted(values):
        why = _bad_shard_name(v)
        if why is not None:
            blocked.add(v)
            ts = mapped(v)
            ck.issues.append(_finding(
                C.IX_BAD_SHARD_NAME, LOAD, INDEX_NAME,
                f"weight_map names shard {v!r}, which {why}; it was not opened and its {len(ts)} tensor(s) "
                "will not be loaded from it", tensors=ts, data={"shard": v, "tensor_count": len(ts)},
                hint="weight_map values must be plain file names of .safetensors files in the checkpoint directory"))
        elif v not in names and src.complete:
            blocked.add(v)
            _missing_shard(ck, v, mapped(v))
        else:
            referenced.append(v)
    unreferenced = [n for n in st_names if n not in values]
    all_reads = src.read_shards(referenced + unreferenced)
    reads: dict[str, ShardRead] = {}
    for v in referenced:
        r = all_reads[v]
        if r.missing:  # a source that could not list its files learns it only now
            blocked.add(v)
            _missing_shard(ck, v, mapped(v))
        else:
            reads[v] = r
    _collect(ck, reads, weight_map)

    # .safetensors files the index does not name: frameworks skip them
    unref_tensors: dict[str, str] = {}
    for n in unreferenced:
        r = all_reads[n]
        if r.lfs is not None:
            detail = "; it is a Git LFS pointer"
        elif r.fatal:
            detail = "; its header cannot be read either"
        else:
            detail = f"; its {len(r.tensors)} tensor(s) are not loaded"
        for t in r.tensors:
            unref_tensors.setdefault(t, n)
        ck.issues.append(_finding(
            C.IX_UNREFERENCED_SHARD, HYGIENE, n,
            f"not referenced by {INDEX_NAME}; frameworks read only the shards the index names{detail}",
            tensors=list(r.tensors), data={"tensor_count": len(r.tensors), "size": r.info.size},
            hint=f"add its tensors to {INDEX_NAME} if they are needed (e.g. MTP weights), or delete the file"))

    _compare_index(ck, weight_map, reads, blocked, unref_tensors)
    _check_total_size(ck, reads, blocked)
    if not values and not st_names:
        _no_weights(ck, names)
    _slim(ck)


# Raw index text kept for locating findings at a line (SARIF) only up to this size: a 1,000,000-tensor
# index is ~100 MB of text plus a dict of the same entries, and memory must stay bounded.
MAX_KEPT_TEXT = 16 * 2**20


def _slim(ck: Checkpoint) -> None:
    """Drop what was only needed to compare the index with the headers."""
    if isinstance(ck.index, dict) and "weight_map" in ck.index:
        wm = ck.index["weight_map"]
        ck.index = {k: v for k, v in ck.index.items() if k != "weight_map"}
        ck.index["weight_map_entries"] = len(wm) if isinstance(wm, dict) else None
    text = ck.texts.get(INDEX_NAME)
    if text is not None and len(text) > MAX_KEPT_TEXT:
        del ck.texts[INDEX_NAME]


def _missing_shard(ck: Checkpoint, v: str, ts: list[str]) -> None:
    ck.issues.append(_finding(
        C.IX_MISSING_SHARD, LOAD, INDEX_NAME,
        f"weight_map names shard {v!r} for {len(ts)} tensor(s) but that file does not exist",
        tensors=ts, error_text=C.ST_NOT_FOUND.format(path=v), data={"shard": v, "tensor_count": len(ts)},
        hint="download the missing shard, or regenerate the index from the shards that exist"))


def _bad_shard_name(v: str) -> str | None:
    if not v:
        return "is empty"
    if v in (".", ".."):
        return "is not a file name"
    if "/" in v or "\\" in v or "\0" in v:
        if v.startswith("/") or v[1:3] == ":\\" or v[1:3] == ":/":
            return "is an absolute path, not a file name inside the checkpoint directory"
        return "is a path, not a plain file name inside the checkpoint directory"
    if not v.endswith(".safetensors"):
        return "is not a .safetensors file"
    return None


def _no_weights(ck: Checkpoint, names: set[str]) -> None:
    other = sorted(n for n in names if n.endswith(OTHER_WEIGHT_SUFFIXES))
    if other:
        ck.issues.append(_finding(
            C.IX_NO_WEIGHTS, HYGIENE, None,
            f"no .safetensors weights; the weights are in other formats ({', '.join(other[:5])}"
            + (", ..." if len(other) > 5 else "") + "), which ckptlint does not read: tensors were not checked",
            data={"files": other}, hint="convert the weights to safetensors to have them checked"))
    else:
        ck.issues.append(_finding(
            C.IX_NO_WEIGHTS, LOAD, None, "checkpoint directory has no weight files (no *.safetensors)",
            hint="download or export the weights next to config.json"))


# --------------------------------------------------------------------------- JSON side files


def _read_configs(ck: Checkpoint, src: Source, present: Callable[[str], bool], *, require_config: bool) -> None:
    for name in (CONFIG_NAME, QUANT_CONFIG_NAME):
        if not present(name):
            if name == CONFIG_NAME and require_config:
                ck.issues.append(_finding(
                    C.CF_MISSING, LOAD, CONFIG_NAME,
                    "missing: frameworks need it to know the architecture and quantization; the weights were "
                    "checked as a container only",
                    hint="download config.json from the model repository (it is small and always required)"))
            continue
        jr = src.read_json(name)
        if jr.text is not None:
            ck.texts[name] = jr.text
        reader = "frameworks" if name == CONFIG_NAME else "frameworks that read it"
        if jr.error is not None:
            ck.issues.append(_finding(C.CF_INVALID_JSON, LOAD, name, f"{jr.error}; {reader} fail to load it",
                                      hint=f"fix or re-download {name}"))
            continue
        if type(jr.obj) is not dict:
            ck.issues.append(_finding(C.CF_NOT_OBJECT, LOAD, name,
                                      f"is a JSON {jtype(jr.obj)}, not an object; {reader} fail to load it",
                                      hint=f"fix or re-download {name}"))
            continue
        if name == CONFIG_NAME:
            ck.config = jr.obj
        else:
            ck.hf_quant_config = jr.obj
        if jr.duplicates:
            ck.issues.append(_finding(
                C.CF_DUPLICATE_KEY, HYGIENE, name,
                f"key {jr.duplicates[0]!r}" + (f" and {len(jr.duplicates) - 1} more" if len(jr.duplicates) > 1 else "")
                + " appear(s) more than once; only the last value is used", data={"keys": jr.duplicates},
                hint="remove the stale copy so the file says one thing"))


def _read_index(ck: Checkpoint, jr: JsonRead) -> dict[str, str] | None:
    if jr.text is not None:
        ck.texts[INDEX_NAME] = jr.text
    hint = "regenerate the index from the shards (huggingface_hub / transformers save_pretrained)"
    if jr.error is not None:
        ck.issues.append(_finding(C.IX_INVALID_JSON, LOAD, INDEX_NAME,
                                  f"{jr.error}; frameworks fail to read the shard list (all shards were checked instead)",
                                  hint=hint))
        return None
    obj = jr.obj
    if type(obj) is not dict:
        ck.issues.append(_finding(C.IX_INVALID_JSON, LOAD, INDEX_NAME,
                                  f"is a JSON {jtype(obj)}, not an object; frameworks fail to read the shard list",
                                  hint=hint))
        return None
    ck.index = obj
    if jr.duplicates:
        ck.issues.append(_finding(
            C.IX_DUPLICATE_KEY, HYGIENE, INDEX_NAME,
            f"key {jr.duplicates[0]!r}" + (f" and {len(jr.duplicates) - 1} more" if len(jr.duplicates) > 1 else "")
            + " appear(s) more than once; only the last entry is used",
            tensors=[k for k in jr.duplicates], data={"keys": jr.duplicates}, hint=hint))
    meta = obj.get("metadata")
    if "metadata" in obj and type(meta) is not dict:
        ck.issues.append(_finding(C.IX_BAD_METADATA, HYGIENE, INDEX_NAME,
                                  f"metadata is a JSON {jtype(meta)}, not an object", hint=hint))
    elif type(meta) is dict and "total_size" in meta:
        ts = meta["total_size"]
        if type(ts) is not int or ts < 0:
            ck.issues.append(_finding(C.IX_BAD_METADATA, HYGIENE, INDEX_NAME,
                                      f"metadata.total_size is {ts!r}, not a non-negative integer", hint=hint))
    if "weight_map" not in obj:
        ck.issues.append(_finding(C.IX_BAD_WEIGHT_MAP, LOAD, INDEX_NAME,
                                  "has no weight_map; frameworks fail to read the shard list (all shards were checked instead)",
                                  hint=hint))
        return None
    wm = obj["weight_map"]
    if type(wm) is not dict:
        ck.issues.append(_finding(C.IX_BAD_WEIGHT_MAP, LOAD, INDEX_NAME,
                                  f"weight_map is a JSON {jtype(wm)}, not an object; frameworks fail to read the shard "
                                  "list (all shards were checked instead)", hint=hint))
        return None
    if set(map(type, wm.values())) <= {str}:  # (C-level: this map has one entry per tensor)
        return wm
    bad = [k for k, v in wm.items() if type(v) is not str]
    ck.issues.append(_finding(
        C.IX_BAD_WEIGHT_MAP, LOAD, INDEX_NAME,
        f"weight_map value for {bad[0]!r} is a JSON {jtype(wm[bad[0]])}, not a file name"
        + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "") + "; frameworks fail to read the shard list",
        tensors=bad, hint=hint))
    return {k: v for k, v in wm.items() if type(v) is str}


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
        files = [f for f, _ in lfs]
        listed = ", ".join(files[:5]) + (f", ... ({len(files)} files)" if len(files) > 5 else "")
        mapped = [t for t, s in (weight_map or {}).items() if s in set(files)]
        ck.issues.append(Finding(
            code=C.SF_LFS_POINTER, consequence=LOAD, file=files[0], tensors=mapped,
            message=f"{listed}: Git LFS pointer file(s), not weights: the weights were never downloaded "
                    "(a clone without `git lfs`, or `actions/checkout` without `lfs: true`)",
            hint=C.LFS_HINT, error_text=C.ST_TOO_LARGE,
            data={"files": {f: info for f, info in lfs}, "safetensors_error": "HeaderTooLarge"}))
    if dups:
        _report_dups(ck, dups, reads)


def _report_dups(ck: Checkpoint, dups: dict[str, list[str]], reads: dict[str, ShardRead]) -> None:
    groups: dict[tuple[tuple[str, ...], bool], list[str]] = {}
    for t, files in dups.items():
        infos = [reads[f].tensors[t] for f in files]
        same = all((i.dtype, i.shape) == (infos[0].dtype, infos[0].shape) for i in infos)
        groups.setdefault((tuple(files), same), []).append(t)
    for (files, same), ts in sorted(groups.items()):
        ts.sort()
        listed = " and ".join(files)
        first = f"tensor {ts[0]!r}" + (f" and {len(ts) - 1} more" if len(ts) > 1 else "")
        if same:
            what = f"{first} stored in both {listed} with the same dtype and shape; loaded twice, the last copy wins"
            cons = HYGIENE
        else:
            a, b = reads[files[0]].tensors[ts[0]], reads[files[-1]].tensors[ts[0]]
            what = (f"{first} stored in both {listed} with different dtype/shape ({a.dtype} {list(a.shape)} vs "
                    f"{b.dtype} {list(b.shape)}); which copy is used depends on the order the framework reads files")
            cons = SILENT
        ck.issues.append(Finding(code=C.IX_TENSOR_IN_TWO_SHARDS, consequence=cons, file=files[-1],
                                 message=f"{files[-1]}: {what}", tensors=ts, data={"files": list(files)},
                                 hint="keep each tensor in exactly one shard"))


def _compare_index(ck: Checkpoint, weight_map: dict[str, str], reads: dict[str, ShardRead],
                   blocked: set[str], unref_tensors: dict[str, str]) -> None:
    tensors = ck.tensors
    if len(weight_map) == len(tensors) and _index_matches(weight_map, reads):
        return
    usable = {s for s, r in reads.items() if not r.fatal}
    per_shard: dict[str, list[str]] = {}
    for s in usable:
        per_shard[s] = list(reads[s].tensors)
    elsewhere: dict[str, list[tuple[str, str]]] = {}
    nowhere: dict[str, list[str]] = {}
    for t, s in weight_map.items():
        if s not in usable or t in reads[s].tensors:
            continue
        ti = tensors.get(t)
        if ti is not None:
            elsewhere.setdefault(s, []).append((t, ti.file))
        else:
            nowhere.setdefault(s, []).append(t)
    for s in sorted(elsewhere):
        items = elsewhere[s]
        t, other = items[0]
        ck.issues.append(_finding(
            C.IX_TENSOR_NOT_IN_SHARD, HYGIENE, INDEX_NAME,
            f"weight_map puts {len(items)} tensor(s) in {s} but that shard does not contain them (e.g. {t!r}, "
            f"found in {other}); frameworks read every listed shard, so they still load",
            tensors=[x for x, _ in items], data={"shard": s, "found_in": {x: f for x, f in items[:50]}},
            hint="regenerate the index from the shards"))
    for s in sorted(nowhere):
        ts = nowhere[s]
        only_unref = [t for t in ts if t in unref_tensors]
        extra = ""
        if only_unref:
            extra = (f"; {len(only_unref)} of them exist only in unreferenced file(s) "
                     f"({', '.join(sorted({unref_tensors[t] for t in only_unref})[:3])}), which frameworks skip")
        ck.issues.append(_finding(
            C.IX_TENSOR_NOT_IN_SHARD, SILENT, INDEX_NAME,
            f"weight_map puts {len(ts)} tensor(s) in {s} (e.g. {ts[0]!r}) but no listed shard contains them: "
            f"those weights are simply not there{extra}",
            tensors=ts, data={"shard": s, "in_unreferenced_files": {t: unref_tensors[t] for t in only_unref[:50]}},
            hint="re-export the checkpoint, or add the shard that holds these tensors"))
    not_indexed: dict[str, list[str]] = {}
    for t, ti in tensors.items():
        if t not in weight_map:
            not_indexed.setdefault(ti.file, []).append(t)
    if not_indexed:
        all_t = [t for f in sorted(not_indexed) for t in not_indexed[f]]
        by_file = ", ".join(f"{f}: {len(v)}" for f, v in sorted(not_indexed.items()))
        ck.issues.append(_finding(
            C.IX_TENSOR_NOT_IN_INDEX, HYGIENE, INDEX_NAME,
            f"{len(all_t)} tensor(s) stored in shards are not listed in weight_map (e.g. {all_t[0]!r}; {by_file}); "
            "frameworks read whole shard files, so they still load",
            tensors=all_t, data={"by_file": {f: len(v) for f, v in not_indexed.items()}},
            hint="regenerate the index from the shards"))


def _index_matches(weight_map: dict[str, str], reads: dict[str, ShardRead]) -> bool:
    """True when every tensor of every read shard is mapped to that shard (C-level loops: no
    dict is built; measured faster than comparing whole dicts at 92,000 and 1,000,000 tensors).

    With as many index entries as distinct tensors, that makes weight_map and the headers agree
    exactly. Shards that were not read have no tensors, so any index entry for them fails the
    count unless a tensor is missing elsewhere too; the slow comparison sorts that out.
    """
    get = weight_map.get
    total = 0
    for s, r in reads.items():
        st = r.tensors
        total += len(st)
        if st and not all(map(eq, repeat(s), map(get, st))):
            return False
    return total == len(weight_map)


def _check_total_size(ck: Checkpoint, reads: dict[str, ShardRead], blocked: set[str]) -> None:
    meta = (ck.index or {}).get("metadata")
    if type(meta) is not dict:
        return
    total = meta.get("total_size")
    if type(total) is not int or total < 0:
        return
    if blocked or any(r.fatal for r in reads.values()):
        return  # sums over an incomplete shard set would mislead
    tensor_bytes = sum(r.info.data_bytes for r in reads.values())
    if total == tensor_bytes:
        return
    file_bytes = sum(r.info.size for r in reads.values())
    also = (" It equals the sum of the shard file sizes (headers included), as some exporters write it."
            if total == file_bytes else "")
    ck.issues.append(_finding(
        C.IX_TOTAL_SIZE, HYGIENE, INDEX_NAME,
        f"metadata.total_size is {total:,} but the listed shards hold {tensor_bytes:,} bytes of tensor data "
        f"(difference {total - tensor_bytes:+,}); readers do not check it.{also}".rstrip(),
        data={"total_size": total, "tensor_bytes": tensor_bytes, "file_bytes": file_bytes},
        hint="set metadata.total_size to the sum of tensor byte sizes"))
