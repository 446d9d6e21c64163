"""Read ``model.safetensors.index.json`` and report problems with the file itself (IX2xx).

The index's ``weight_map`` tells frameworks which shard holds each tensor. This module checks
the file (JSON, ``weight_map``, ``metadata``, repeated keys), the shard names it gives, and its
``metadata.total_size``; :mod:`ckptlint.reader.fileset` compares it with the shards.

The rules are declared in :mod:`ckptlint.rules.index_file`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ckptlint.reader.jsonfiles import JsonRead, jtype
from ckptlint.reader.names import INDEX_NAME
from ckptlint.reader.report import HYGIENE, LOAD, MAX_SHARD_FINDINGS, file_finding, first_tensors, listed
from ckptlint.rules.index_file import (IndexDuplicateKey, IndexInvalidJson, IndexInvalidMetadata, IndexInvalidShardName,
                                       IndexInvalidWeightMap, IndexTotalSizeMismatch)

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.reader.header import ShardRead

_HINT = "regenerate the index from the shards (huggingface_hub / transformers save_pretrained)"


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
