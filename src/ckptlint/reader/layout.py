"""The data layout a validated header describes: offsets, sizes, coverage of the file, duplicates.

After :class:`~ckptlint.reader.entries.Validator` has checked each entry, :func:`report_layout`
walks the entries in offset order (gaps, overlaps, a start other than 0, byte lengths that do not
match dtype and shape), checks that the data buffer covers the rest of the file exactly, reports
duplicate names the re-parse found, and turns every recorded problem into findings.

The rules (SF113-SF115) are declared in :mod:`ckptlint.rules.shard_file`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlint.reader.entries import Validator, grouped_finding
from ckptlint.reader.report import HYGIENE, LOAD, listed, shard_finding
from ckptlint.rules.shard_file import (ST_INCOMPLETE, ShardDuplicateKey, ShardInvalidMetadata, ShardInvalidOffsets,
                                       ShardInvalidTensorEntry, ShardSubByteMisaligned, ShardTensorSizeMismatch,
                                       ShardTensorSizeOverflow, ShardTrailingBytes, ShardTruncated)

if TYPE_CHECKING:
    from ckptlint.reader.header import ShardRead


_LAYOUT_RULES = (ShardInvalidOffsets, ShardTensorSizeMismatch, ShardTensorSizeOverflow, ShardSubByteMisaligned)


def report_layout(v: Validator, res: "ShardRead") -> None:
    """Walk ``v``'s entries in offset order and put every finding of the header into ``res``."""
    top_dups, meta_dups = _duplicates(v)
    prev, data_bytes = _walk_offsets(v)
    for name in v.overflow:
        v.bad(ShardTensorSizeOverflow, name, "element count x dtype bits overflows 64 bits")
    for name, why in v.sub_byte:
        v.bad(ShardSubByteMisaligned, name, f"{why}, not a whole number of bytes")
    info = res.info
    info.data_bytes = data_bytes
    info.n_tensors = len(v.tensors)
    res.tensors = v.tensors
    res.metadata = v.metadata
    layout_bad = any(r in v.problems for r in _LAYOUT_RULES)
    layout_bad |= _coverage(v, prev, res)
    out = res.issues
    for rule, items in sorted(v.problems.items(), key=lambda kv: kv[0].code):
        out.append(grouped_finding(rule, v.rel, items))
    if top_dups:
        cons = LOAD if layout_bad else HYGIENE
        effect = ("safetensors keeps the later entry, and the layout left is invalid (see the other findings)"
                  if layout_bad else "safetensors silently keeps the later entry")
        out.append(shard_finding(ShardDuplicateKey, v.rel,
                                 f"header defines tensor {top_dups[0]!r}"
                                 + (f" and {len(top_dups) - 1} more" if len(top_dups) > 1 else "")
                                 + f" more than once; {effect}",
                                 ST_INCOMPLETE if layout_bad else None, consequence=cons, tensors=top_dups,
                                 hint="re-export the file so every tensor name appears once"))
    if meta_dups:
        out.append(shard_finding(ShardDuplicateKey, v.rel,
                                 f"__metadata__ defines key {meta_dups[0]!r} more than once; the later value is kept",
                                 None, consequence=HYGIENE, data={"metadata_keys": listed(meta_dups), "count": len(meta_dups)}))
    res.refused = any(f.consequence is LOAD for f in out)


def _duplicates(v: Validator) -> tuple[list[str], list[str]]:
    """Duplicate tensor names and ``__metadata__`` keys the re-parse saw (a duplicated
    ``__metadata__`` or entry field is recorded as that entry's problem)."""
    top_dups: list[str] = []
    meta_dups: list[str] = []
    for d, names in v.dups.values():
        if d is v.obj:
            for k in names:
                if k == "__metadata__":
                    v.bad(ShardInvalidMetadata, "__metadata__", "__metadata__ appears twice")
                else:
                    top_dups.append(k)
        elif d is v.obj.get("__metadata__"):
            meta_dups.extend(names)
        else:
            for name, e in v.obj.items():
                if e is d:
                    v.bad(ShardInvalidTensorEntry, name, f"entry has duplicate field(s) {', '.join(names)}")
                    break
    return top_dups, meta_dups


def _walk_offsets(v: Validator) -> tuple[int, int]:
    """Check the entries in offset order. Returns where the data buffer the header describes ends,
    and the bytes of tensor data in it."""
    recs = v.recs
    recs.sort()
    prev = 0
    data_bytes = 0
    first = True
    for b, end, name, expected in recs:
        if end < b:
            v.bad(ShardInvalidOffsets, name, f"data_offsets [{b}, {end}] end before they begin")
        elif b != prev:
            if first:
                what = f"first tensor starts at byte {b} of the data buffer, not 0"
            elif b > prev:
                what = f"gap of {b - prev} bytes before it (begins at {b}, previous tensor ends at {prev})"
            else:
                what = f"overlaps the previous tensor (begins at {b}, previous tensor ends at {prev})"
            v.bad(ShardInvalidOffsets, name, what)
        first = False
        if end >= b:
            data_bytes += end - b
            if expected >= 0 and end - b != expected:
                v.bad(ShardTensorSizeMismatch, name, f"data_offsets span {end - b} bytes but dtype and shape need {expected}")
        if end > prev:
            prev = end
    return prev, data_bytes


def _coverage(v: Validator, prev: int, res: "ShardRead") -> bool:
    """Report a data buffer that ends past the end of the file, or short of it; True if so."""
    file_end = 8 + v.n + prev
    size = v.size
    if file_end > size:
        beyond = [name for b, end, name, _ in v.recs if 8 + v.n + end > size]
        missing = file_end - size
        res.issues.append(shard_finding(
            ShardTruncated, v.rel,
            f"file is truncated: the header places tensor data up to byte {file_end:,} but the file has "
            f"{size:,} bytes ({missing:,} bytes missing, {len(beyond)} tensor(s) affected)",
            ST_INCOMPLETE, tensors=beyond, data={"expected_size": file_end, "size": size, "missing_bytes": missing},
            hint="the download or export was interrupted: fetch this file again"))
        return True
    if file_end < size and not v.unplaced:
        extra = size - file_end
        res.issues.append(shard_finding(
            ShardTrailingBytes, v.rel,
            f"{extra:,} trailing bytes after the last tensor's data (file has {size:,} bytes, "
            f"the header accounts for {file_end:,})", ST_INCOMPLETE,
            data={"expected_size": file_end, "size": size, "trailing_bytes": extra},
            hint="re-export the file; safetensors refuses data it cannot account for"))
        return True
    return False
