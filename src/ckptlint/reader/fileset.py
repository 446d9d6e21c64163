"""Compare the index with the shard files that exist and the tensors their headers hold (IX2xx).

Shards the index names but the directory lacks, tensors the index places in the wrong shard or
in none, tensors in two shards, tensors no index entry lists, ``.safetensors`` files the index
does not name, and a directory with no safetensors weights at all.
"""

from __future__ import annotations

from dataclasses import replace
from operator import contains
from typing import TYPE_CHECKING, Callable, Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.reader.names import INDEX_NAME
from ckptlint.reader.report import (HYGIENE, LOAD, MAX_SHARD_FINDINGS, SILENT, ST_NOT_FOUND, file_finding,
                                    first_tensors, listed)
from ckptlint.rules.base import ReaderRule, RuleContext

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.reader.header import ShardRead

OTHER_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".npz")
# File names a framework's error text quotes at most (it lists every missing shard).
MAX_FILES_QUOTED = 10


class IndexMissingShard(ReaderRule):
    """The index names a shard file that does not exist.

    ## What it does
    Reports shard names in `weight_map` that are not in the checkpoint directory, with the
    tensors mapped to them.

    ## Why is this bad?
    Loaders look for every listed shard and fail (or miss those weights).

    ## Example
    `weight_map` mentions `model-00003-of-00003.safetensors`, but only two shards were
    downloaded.

    ## How to fix
    Download the missing shard, or regenerate the index.
    """

    code = "IX204"
    name = "index-missing-shard"
    consequences = (LOAD, Consequence.SILENT_CORRUPTION)
    # What happens depends on the release (target data `loading.missing_shard`): SGLang <= 0.5.16
    # and vLLM load the shards that are present and leave the rest uninitialised; SGLang >= 0.5.17
    # refuses to start. So this reader finding is reported once per target.
    scope = "target"

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        issues = [i for i in ctx.checkpoint.issues if i.code == self.code]
        if not issues:
            return
        if ctx.target is None:
            yield from super().check(ctx)
            return
        outcome = ctx.target.data.loading.missing_shard
        files = [s for i in issues for s in i.data.get("shards", [i.data.get("shard")])]
        n = sum(i.data.get("shard_count", 1) for i in issues)
        text = (outcome.error or "").format(index_file=ctx.checkpoint.index_file or INDEX_NAME,
                                             n=n, dir=ctx.checkpoint.root, files=_shown(files, n),
                                             file_set=_shown(files, n, "{}")) or None
        consequence = Consequence(outcome.consequence)
        for i in issues:
            message = i.message + "; " + mention(ctx.target.resolved) + f": {outcome.note}" if outcome.note else i.message
            yield replace(i, target=ctx.target.id, consequence=consequence, severity=consequence.default_severity,
                          error_text=text, data=dict(i.data), message=message)


class IndexTensorNotInShard(ReaderRule):
    """The index maps tensors to a shard whose header does not contain them.

    ## What it does
    Compares `weight_map` with the shard headers and reports tensors the index places in a
    shard that lacks them. If the tensor is in another listed shard it is hygiene
    (frameworks read every listed file); if no listed shard has it, the weight is simply not
    there.

    ## Why is this bad?
    A missing weight is left uninitialised by several loaders (silently, for quantized
    layers), so the model produces garbage.

    ## Example
    The index says `model.layers.61.eh_proj.weight` is in shard 2, and no shard has it.

    ## How to fix
    Re-export the checkpoint, or add the shard that holds those tensors.
    """

    code = "IX205"
    name = "index-tensor-not-in-shard"
    consequences = (HYGIENE, SILENT,)


class TensorInMultipleShards(ReaderRule):
    """The same tensor is stored in more than one shard.

    ## What it does
    Reports tensor names present in two or more shards that are read.

    ## Why is this bad?
    Frameworks load every file, so the tensor is loaded twice and the last copy wins; when
    the copies differ in dtype or shape, which one is used depends on file order.

    ## Example
    `lm_head.weight` in both `model-00001-of-00002.safetensors` and
    `model-00002-of-00002.safetensors`.

    ## How to fix
    Keep each tensor in exactly one shard.
    """

    code = "IX206"
    name = "tensor-in-multiple-shards"
    consequences = (HYGIENE, SILENT,)


class TensorNotInIndex(ReaderRule):
    """Shards contain tensors the index does not list.

    ## What it does
    Reports tensors found in a listed shard's header but absent from `weight_map`.

    ## Why is this bad?
    Frameworks read whole shard files, so they still load; but tools that trust the index
    (parameter counts, partial loaders) miss them.

    ## Example
    MTP weights appended to the last shard without updating the index.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX207"
    name = "tensor-not-in-index"
    consequences = (HYGIENE,)


class UnreferencedShard(ReaderRule):
    """A `.safetensors` file in the directory is not referenced by the index.

    ## What it does
    Reports `.safetensors` files beside an index that does not name them, with the tensors
    they hold. Their tensors are not part of the checkpoint's tensor set.

    ## Why is this bad?
    Frameworks read only the shards the index names, so these tensors are never loaded: dead
    weight at best, and missing weights (e.g. an MTP layer) if they were meant to load.

    ## Example
    `model_mtp.safetensors` added next to the shards, but `weight_map` never updated.

    ## How to fix
    Add its tensors to the index if they are needed, or delete the file.
    """

    code = "IX209"
    name = "unreferenced-shard"
    consequences = (HYGIENE,)


class NoSafetensorsWeights(ReaderRule):
    """The checkpoint directory has no `.safetensors` weights.

    ## What it does
    Reports a checkpoint directory (with `config.json`) that contains no `.safetensors`
    files. If weights in other formats (`.bin`, `.pt`, `.gguf`, ...) are there it is
    hygiene: they were not checked.

    ## Why is this bad?
    Without weight files there is nothing to load; with only non-safetensors weights,
    ckptlint cannot check anything.

    ## Example
    A repository cloned with only its JSON files.

    ## How to fix
    Download the weights, or convert them to safetensors.
    """

    code = "IX210"
    name = "no-safetensors-weights"
    consequences = (LOAD, HYGIENE,)


def _shown(files: list[str], n: int, brackets: str = "[]") -> str:
    """``files`` as a framework's error text prints them (a Python list, or a set with ``"{}"``),
    the first few of ``n``."""
    text = ", ".join(map(repr, files[:MAX_FILES_QUOTED]))
    if n > MAX_FILES_QUOTED or len(files) != n:
        text += f", ... ({n:,} in all)"
    return brackets[0] + text + brackets[1]


def missing_shards(ck: "Checkpoint", missing: list[str], mapped: Callable[[str], list[str]]) -> None:
    """Report the shards the index names that do not exist (``mapped``: the tensors of a shard)."""
    if len(missing) <= MAX_SHARD_FINDINGS:
        for v in missing:
            ts = mapped(v)
            ck.issues.append(file_finding(
                IndexMissingShard, LOAD, INDEX_NAME,
                f"weight_map names shard {v!r} for {len(ts)} tensor(s) but that file does not exist",
                tensors=ts, error_text=ST_NOT_FOUND.format(path=v), data={"shard": v, "tensor_count": len(ts)},
                hint="download the missing shard, or regenerate the index from the shards that exist"))
        return
    ts, count = first_tensors(missing, mapped)
    ck.issues.append(file_finding(
        IndexMissingShard, LOAD, INDEX_NAME,
        f"weight_map names {len(missing):,} shard files that do not exist ({', '.join(map(repr, missing[:3]))}, ...) "
        f"for {count:,} tensor(s)", tensors=ts, error_text=ST_NOT_FOUND.format(path=missing[0]),
        data={"shards": listed(missing), "shard_count": len(missing), "tensor_count": count},
        hint="download the missing shards, or regenerate the index from the shards that exist"))


def unreferenced_shard(ck: "Checkpoint", n: str, r: "ShardRead") -> None:
    """Report shard file ``n`` (read as ``r``), which the index does not name."""
    if r.lfs is not None:
        detail = "; it is a Git LFS pointer"
    elif r.fatal:
        detail = "; its header cannot be read either"
    else:
        detail = f"; its {len(r.tensors)} tensor(s) are not loaded"
    ck.issues.append(file_finding(
        UnreferencedShard, HYGIENE, n,
        f"not referenced by {INDEX_NAME}; frameworks read only the shards the index names{detail}",
        tensors=list(r.tensors), data={"tensor_count": len(r.tensors), "size": r.info.size},
        hint=f"add its tensors to {INDEX_NAME} if they are needed (e.g. MTP weights), or delete the file"))


def no_weights(ck: "Checkpoint", names: set[str]) -> None:
    other = sorted(n for n in names if n.endswith(OTHER_WEIGHT_SUFFIXES))
    if other:
        ck.issues.append(file_finding(
            NoSafetensorsWeights, HYGIENE, None,
            f"no .safetensors weights; the weights are in other formats ({', '.join(other[:5])}"
            + (", ..." if len(other) > 5 else "") + "), which ckptlint does not read: tensors were not checked",
            data={"files": listed(other), "count": len(other)}, hint="convert the weights to safetensors to have them checked"))
    else:
        ck.issues.append(file_finding(
            NoSafetensorsWeights, LOAD, None, "checkpoint directory has no weight files (no *.safetensors)",
            hint="download or export the weights next to config.json"))


def report_dups(ck: "Checkpoint", dups: dict[str, list[str]], reads: dict[str, "ShardRead"]) -> None:
    """Report tensors stored in more than one shard (``dups``: tensor -> files, in read order)."""
    groups: dict[tuple[tuple[str, ...], bool], list[str]] = {}
    for t, files in dups.items():
        infos = [reads[f].tensors[t] for f in files]
        same = all((i.dtype, i.shape) == (infos[0].dtype, infos[0].shape) for i in infos)
        groups.setdefault((tuple(files), same), []).append(t)
    for (files, same), ts in sorted(groups.items()):
        ts.sort()
        both = " and ".join(files)
        first = f"tensor {ts[0]!r}" + (f" and {len(ts) - 1} more" if len(ts) > 1 else "")
        if same:
            what = f"{first} stored in both {both} with the same dtype and shape; loaded twice, the last copy wins"
            cons = HYGIENE
        else:
            a, b = reads[files[0]].tensors[ts[0]], reads[files[-1]].tensors[ts[0]]
            what = (f"{first} stored in both {both} with different dtype/shape ({a.dtype} {list(a.shape)} vs "
                    f"{b.dtype} {list(b.shape)}); which copy is used depends on the order the framework reads files")
            cons = SILENT
        ck.issues.append(Finding(code=TensorInMultipleShards.code, name=TensorInMultipleShards.name, consequence=cons,
                                 file=files[-1], message=f"{files[-1]}: {what}", tensors=ts, data={"files": listed(files), "file_count": len(files)},
                                 hint="keep each tensor in exactly one shard"))


def compare_index(ck: "Checkpoint", weight_map: dict[str, str], reads: dict[str, "ShardRead"],
                  unref_tensors: dict[str, str]) -> None:
    """Report where ``weight_map`` and the headers of the shards read disagree (IX205, IX207)."""
    tensors = ck.tensors
    if len(weight_map) == len(tensors) and index_matches(weight_map, reads):
        return
    usable = {s for s, r in reads.items() if not r.fatal}
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
        ck.issues.append(file_finding(
            IndexTensorNotInShard, HYGIENE, INDEX_NAME,
            f"weight_map puts {len(items)} tensor(s) in {s} but that shard does not contain them (e.g. {t!r}, "
            f"found in {other}); frameworks read every listed shard, so they still load",
            tensors=[x for x, _ in items], data={"shard": s, "found_in": {x: f for x, f in items[:50]}},
            hint="regenerate the index from the shards"))
    for s in sorted(nowhere):
        _not_anywhere(ck, s, nowhere[s], unref_tensors)
    _not_indexed(ck, weight_map)


def _not_anywhere(ck: "Checkpoint", s: str, ts: list[str], unref_tensors: dict[str, str]) -> None:
    only_unref = [t for t in ts if t in unref_tensors]
    extra = ""
    if only_unref:
        extra = (f"; {len(only_unref)} of them exist only in unreferenced file(s) "
                 f"({', '.join(sorted({unref_tensors[t] for t in only_unref})[:3])}), which frameworks skip")
    ck.issues.append(file_finding(
        IndexTensorNotInShard, SILENT, INDEX_NAME,
        f"weight_map puts {len(ts)} tensor(s) in {s} (e.g. {ts[0]!r}) but no listed shard contains them: "
        f"those weights are simply not there{extra}",
        tensors=ts, data={"shard": s, "in_unreferenced_files": {t: unref_tensors[t] for t in only_unref[:50]}},
        hint="re-export the checkpoint, or add the shard that holds these tensors"))


def _not_indexed(ck: "Checkpoint", weight_map: dict[str, str]) -> None:
    not_indexed: dict[str, list[str]] = {}
    for t, ti in ck.tensors.items():
        if t not in weight_map:
            not_indexed.setdefault(ti.file, []).append(t)
    if not_indexed:
        all_t = [t for f in sorted(not_indexed) for t in not_indexed[f]]
        files = sorted(not_indexed)
        by_file = ", ".join(f"{f}: {len(not_indexed[f])}" for f in files[:5]) + (", ..." if len(files) > 5 else "")
        ck.issues.append(file_finding(
            TensorNotInIndex, HYGIENE, INDEX_NAME,
            f"{len(all_t)} tensor(s) stored in shards are not listed in weight_map (e.g. {all_t[0]!r}; {by_file}); "
            "frameworks read whole shard files, so they still load",
            tensors=all_t, data={"by_file": listed({f: len(v) for f, v in not_indexed.items()}), "file_count": len(files)},
            hint="regenerate the index from the shards"))


def index_matches(weight_map: dict[str, str], reads: dict[str, "ShardRead"]) -> bool:
    """True when every ``weight_map`` entry names a read shard that holds that tensor, and the read
    shards hold as many tensors as ``weight_map`` has entries: then the index and the headers agree
    exactly (each header tensor is one entry). Shards that were not read fail the lookup; a tensor
    in two shards, or a missing entry, fails the count; the slow comparison sorts that out.

    Walks the index in its own order and looks each name up in its shard's tensor map (C-level
    loops, no dict built): those maps are small and an index lists a shard's tensors mostly
    together, so the lookups stay in cache, where looking every header name up in ``weight_map``
    (one dict of every tensor) missed it on almost every name: 12-23 ms against 37-46 ms at
    DeepSeek-V3 scale, 154-158 ms against 582-618 ms for 1,000,000 tensors (fresh processes).
    """
    maps = {s: r.tensors for s, r in reads.items()}
    try:
        if not all(map(contains, map(maps.__getitem__, weight_map.values()), weight_map)):
            return False
    except (KeyError, TypeError):  # a shard that was not read (or a value that names none)
        return False
    return sum(map(len, maps.values())) == len(weight_map)
