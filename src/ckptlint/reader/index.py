"""Read ``model.safetensors.index.json`` and report problems with the file itself (IX2xx).

The index's ``weight_map`` tells frameworks which shard holds each tensor. This module checks
the file (JSON, ``weight_map``, ``metadata``, repeated keys), the shard names it gives, and its
``metadata.total_size``; :mod:`ckptlint.reader.fileset` compares it with the shards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ckptlint.reader.jsonfiles import JsonRead, jtype
from ckptlint.reader.names import INDEX_NAME
from ckptlint.reader.report import HYGIENE, LOAD, MAX_SHARD_FINDINGS, file_finding, first_tensors, listed
from ckptlint.rules.base import ReaderRule

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.reader.header import ShardRead

_HINT = "regenerate the index from the shards (huggingface_hub / transformers save_pretrained)"


class IndexInvalidJson(ReaderRule):
    """`model.safetensors.index.json` is not a JSON object.

    ## What it does
    Reports an index that cannot be read, is not UTF-8 or valid JSON, or is not a JSON
    object. An index that is not a regular file (a FIFO, a device) or is larger than 256 MiB
    (about 2.5 million tensors) is not read at all and reported the same way.

    ## Why is this bad?
    Frameworks parse the index to find the shards and fail. ckptlint then checks every
    `.safetensors` file in the directory instead.

    ## Example
    An index truncated in the middle of `weight_map`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX201"
    name = "index-invalid-json"
    consequences = (LOAD,)


class IndexInvalidWeightMap(ReaderRule):
    """The index has no usable `weight_map`.

    ## What it does
    Reports an index without `weight_map`, with a `weight_map` that is not an object, or
    with values that are not strings.

    ## Why is this bad?
    Frameworks take the shard list from `weight_map` and fail when it is missing or
    malformed.

    ## Example
    `"weight_map": ["model-00001-of-00002.safetensors"]`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX202"
    name = "index-invalid-weight-map"
    consequences = (LOAD,)


class IndexInvalidShardName(ReaderRule):
    """The index names a shard that is not a plain `.safetensors` file name.

    ## What it does
    Reports `weight_map` values that are empty, `.`/`..`, contain a slash or backslash, are absolute
    paths, or do not end in `.safetensors`. Such a path is never opened or even stat'ed.

    ## Why is this bad?
    Shards must live in the checkpoint directory; a path outside it is at best a broken
    download and at worst makes a loader read files it should not. The tensors mapped to it
    are not loaded.

    ## Example
    `"lm_head.weight": "../secret.safetensors"`.

    ## How to fix
    Map every tensor to a shard file in the checkpoint directory.
    """

    code = "IX203"
    name = "index-invalid-shard-name"
    consequences = (LOAD,)


class IndexTotalSizeMismatch(ReaderRule):
    """The index's `metadata.total_size` is not the sum of tensor bytes.

    ## What it does
    Compares `metadata.total_size` with the sum of tensor byte sizes in the listed shards
    and says whether it equals the sum of file sizes instead.

    ## Why is this bad?
    Readers do not check it, but it should be the tensor byte total (as huggingface_hub
    writes it); a different value hints at an index written for other files.

    ## Example
    `total_size` counts the shard files' headers too, as some export scripts compute it.

    ## How to fix
    Set `metadata.total_size` to the sum of tensor byte sizes.
    """

    code = "IX208"
    name = "index-total-size-mismatch"
    consequences = (HYGIENE,)


class IndexInvalidMetadata(ReaderRule):
    """The index's `metadata` or `metadata.total_size` has the wrong type.

    ## What it does
    Reports an index whose `metadata` is not an object, or whose `total_size` is not a
    non-negative integer.

    ## Why is this bad?
    Serving frameworks ignore it, but other tools read it and may fail.

    ## Example
    `"metadata": {"total_size": "16GB"}`.

    ## How to fix
    Write `total_size` as the integer sum of tensor bytes.
    """

    code = "IX211"
    name = "index-invalid-metadata"
    consequences = (HYGIENE,)


class IndexDuplicateKey(ReaderRule):
    """The index repeats a key.

    ## What it does
    Reports keys that appear more than once in the same object of the index (usually a
    tensor twice in `weight_map`).

    ## Why is this bad?
    JSON parsers keep the last value silently; if the two entries name different shards, one
    mapping is lost.

    ## Example
    `"lm_head.weight"` listed twice in `weight_map`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX212"
    name = "index-duplicate-key"
    consequences = (HYGIENE,)


def read_index(ck: "Checkpoint", jr: JsonRead) -> dict[str, str] | None:
    """Record the parsed index in ``ck`` and return its usable ``weight_map`` (None: frameworks
    cannot use the index; every shard of the directory is read instead)."""
    held = jr.text if jr.text is not None else jr.ascii_bytes
    if held is not None:
        ck.texts[INDEX_NAME] = held
    if jr.error is not None:
        effect = "not read" if jr.refused else "frameworks fail to read the shard list"
        ck.issues.append(file_finding(IndexInvalidJson, LOAD, INDEX_NAME,
                                      f"{jr.error}; {effect} (all shards were checked instead)", hint=_HINT))
        return None
    obj = jr.obj
    if type(obj) is not dict:
        ck.issues.append(file_finding(IndexInvalidJson, LOAD, INDEX_NAME,
                                      f"is a JSON {jtype(obj)}, not an object; frameworks fail to read the shard list",
                                      hint=_HINT))
        return None
    ck.index = obj
    if jr.duplicates:
        ck.issues.append(file_finding(
            IndexDuplicateKey, HYGIENE, INDEX_NAME,
            f"key {jr.duplicates[0]!r}" + (f" and {len(jr.duplicates) - 1} more" if len(jr.duplicates) > 1 else "")
            + " appear(s) more than once; only the last entry is used",
            tensors=[k for k in jr.duplicates], data={"keys": listed(jr.duplicates), "count": len(jr.duplicates)},
            hint=_HINT))
    _check_metadata(ck, obj)
    return _weight_map(ck, obj)


def _check_metadata(ck: "Checkpoint", obj: dict) -> None:
    meta = obj.get("metadata")
    if "metadata" in obj and type(meta) is not dict:
        ck.issues.append(file_finding(IndexInvalidMetadata, HYGIENE, INDEX_NAME,
                                      f"metadata is a JSON {jtype(meta)}, not an object", hint=_HINT))
    elif type(meta) is dict and "total_size" in meta:
        ts = meta["total_size"]
        if type(ts) is not int or ts < 0:
            ck.issues.append(file_finding(IndexInvalidMetadata, HYGIENE, INDEX_NAME,
                                          f"metadata.total_size is {ts!r}, not a non-negative integer", hint=_HINT))


def _weight_map(ck: "Checkpoint", obj: dict) -> dict[str, str] | None:
    if "weight_map" not in obj:
        ck.issues.append(file_finding(IndexInvalidWeightMap, LOAD, INDEX_NAME,
                                      "has no weight_map; frameworks fail to read the shard list (all shards were checked instead)",
                                      hint=_HINT))
        return None
    wm = obj["weight_map"]
    if type(wm) is not dict:
        ck.issues.append(file_finding(IndexInvalidWeightMap, LOAD, INDEX_NAME,
                                      f"weight_map is a JSON {jtype(wm)}, not an object; frameworks fail to read the shard "
                                      "list (all shards were checked instead)", hint=_HINT))
        return None
    if set(map(type, wm.values())) <= {str}:  # (C-level: this map has one entry per tensor)
        return wm
    bad = [k for k, v in wm.items() if type(v) is not str]
    ck.issues.append(file_finding(
        IndexInvalidWeightMap, LOAD, INDEX_NAME,
        f"weight_map value for {bad[0]!r} is a JSON {jtype(wm[bad[0]])}, not a file name"
        + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "") + "; frameworks fail to read the shard list",
        tensors=bad, hint=_HINT))
    return {k: v for k, v in wm.items() if type(v) is str}


def bad_shard_name(v: str) -> str | None:
    """Why ``v`` cannot be a shard of the checkpoint directory (None: it can). A name that is a
    path is never opened: checkpoints must not make ckptlint read outside their directory."""
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


def bad_shard_names(ck: "Checkpoint", bad: list[tuple[str, str]], mapped: Callable[[str], list[str]]) -> None:
    """Report ``(shard name, why it is not one)`` pairs (``mapped``: the tensors of a shard); many
    are named in one finding, like missing shards."""
    hint = "weight_map values must be plain file names of .safetensors files in the checkpoint directory"
    if len(bad) <= MAX_SHARD_FINDINGS:
        for v, why in bad:
            ts = mapped(v)
            ck.issues.append(file_finding(
                IndexInvalidShardName, LOAD, INDEX_NAME,
                f"weight_map names shard {v!r}, which {why}; it was not opened and its {len(ts)} tensor(s) "
                "will not be loaded from it", tensors=ts, data={"shard": v, "tensor_count": len(ts)}, hint=hint))
        return
    names = [v for v, _ in bad]
    ts, count = first_tensors(names, mapped)
    v, why = bad[0]
    ck.issues.append(file_finding(
        IndexInvalidShardName, LOAD, INDEX_NAME,
        f"weight_map names {len(bad):,} shards that are not plain .safetensors file names (e.g. {v!r}, which {why}); "
        f"they were not opened and their {count:,} tensor(s) will not be loaded from them", tensors=ts,
        data={"shards": listed(names), "shard_count": len(bad), "tensor_count": count}, hint=hint))


def check_total_size(ck: "Checkpoint", reads: dict[str, "ShardRead"], blocked: set[str]) -> None:
    """Compare ``metadata.total_size`` with the tensor bytes of the shards read (all of them)."""
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
    ck.issues.append(file_finding(
        IndexTotalSizeMismatch, HYGIENE, INDEX_NAME,
        f"metadata.total_size is {total:,} but the listed shards hold {tensor_bytes:,} bytes of tensor data "
        f"(difference {total - tensor_bytes:+,}); readers do not check it.{also}".rstrip(),
        data={"total_size": total, "tensor_bytes": tensor_bytes, "file_bytes": file_bytes},
        hint="set metadata.total_size to the sum of tensor byte sizes"))
