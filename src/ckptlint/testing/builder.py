"""Build synthetic checkpoints from a compact tensor listing, valid or deliberately broken.

    from ckptlint.testing.builder import write_checkpoint
    write_checkpoint(tmp_path, config={...}, tensors='''
        model.embed_tokens.weight          BF16     [32000, 4096]
        model.layers.0.mlp.down_proj.weight F8_E4M3 [4096, 11008]
    ''', shards=2)

Files are laid out like the reference writer does it: the JSON header (``__metadata__``
first, then tensors in the order given, compact separators) is padded with spaces to a
multiple of 8 and data offsets are contiguous in the order given. With ``sparse=True`` (the
default) the data buffer is a hole made with ``truncate``, so a 100 GB checkpoint costs no disk
(copy such files only with sparse-aware tools).

``write_safetensors`` takes crafted-invalid options for malformed-input tests; they are applied
on top of the valid layout, so each one breaks exactly one thing.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, Union

from ckptlint.checkpoint import DTYPE_BITS

TensorSpec = tuple[str, str, tuple[int, ...]]
Tensors = Union[str, Iterable[Sequence[Any]]]

INDEX_NAME = "model.safetensors.index.json"
MINIMAL_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "vocab_size": 128,
}


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE: Any = _Delete()
"""Use as a value in ``entry_override`` to remove that key from a tensor entry."""


def parse_listing(text: str) -> list[TensorSpec]:
    """Parse ``name  DTYPE  [d0, d1]`` lines (blank lines and ``#`` comments ignored)."""
    out: list[TensorSpec] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        head, bracket, rest = line.partition("[")
        parts = head.split()
        if not bracket or len(parts) != 2 or not rest.rstrip().endswith("]"):
            raise ValueError(f"listing line {lineno}: expected 'name DTYPE [d0, ...]', got {line!r}")
        inner = rest.rstrip()[:-1].strip()
        try:
            shape = tuple(int(x) for x in inner.split(",") if x.strip()) if inner else ()
        except ValueError:
            raise ValueError(f"listing line {lineno}: bad shape [{inner}]") from None
        out.append((parts[0], parts[1], shape))
    return out


def _specs(tensors: Tensors) -> list[TensorSpec]:
    if isinstance(tensors, str):
        return parse_listing(tensors)
    return [(str(n), str(d), tuple(int(x) for x in s)) for n, d, s in tensors]


def tensor_nbytes(dtype: str, shape: Sequence[int], *, strict: bool = True) -> int:
    """Bytes a tensor occupies (``numel * bits / 8``). ``strict=False`` tolerates unknown
    dtypes (8 bits) and sub-byte sizes that do not fill a byte (rounded up)."""
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        if strict:
            raise ValueError(f"unknown safetensors dtype {dtype!r}")
        bits = 8
    nbits = math.prod(shape) * bits
    if nbits % 8:
        if strict:
            raise ValueError(f"{dtype} {list(shape)}: {nbits} bits is not a whole number of bytes")
        return nbits // 8 + 1
    return nbits // 8


@dataclass
class WrittenFile:
    path: Path
    header_len: int  # the length written in the first 8 bytes
    data_len: int
    size: int
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    nbytes: int = 0  # sum of tensor byte sizes


def _dumps(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Tensors,
    *,
    metadata: Mapping[str, Any] | None = None,
    sparse: bool = True,
    strict: bool = True,
    entry_override: Mapping[str, Any] | None = None,
    offsets_override: Mapping[str, Any] | None = None,
    duplicate_key: str | tuple[str, Any] | None = None,
    extra_pairs: Sequence[tuple[str, Any]] = (),
    leading: str = "",
    pad: bool = True,
    raw_header: bytes | None = None,
    declared_header_len: int | None = None,
    data_len: int | None = None,
    truncate_to: int | None = None,
    append_bytes: bytes = b"",
) -> WrittenFile:
    """Write one safetensors file; the data buffer is zeros (or a hole when ``sparse``).

    Crafted-invalid options (each applied on top of the valid layout):

    * ``entry_override={name: {key: value | DELETE}}`` merges into a tensor's JSON entry;
      ``{name: <non-dict>}`` replaces the entry entirely.
    * ``offsets_override={name: [begin, end]}`` writes these data_offsets instead.
    * ``duplicate_key=name`` repeats that entry right after it (``(name, entry)`` repeats it
      with another entry; the later one is what readers keep).
    * ``extra_pairs=[(key, value), ...]`` appends raw top-level pairs to the header object.
    * ``leading`` is put before the ``{``; ``pad=False`` skips padding to a multiple of 8.
    * ``raw_header`` replaces the whole header text (no padding).
    * ``declared_header_len`` writes this value in the first 8 bytes instead of the real one.
    * ``data_len`` sets the data buffer size (default: what the offsets need).
    * ``truncate_to`` cuts (or extends) the finished file to that many bytes;
      ``append_bytes`` is written at the end first.
    """
    pairs, offsets, pos, total = _header_pairs(_specs(tensors), metadata, strict, entry_override or {},
                                               offsets_override or {}, duplicate_key)
    pairs.extend(extra_pairs)
    if raw_header is not None:
        header = raw_header
    else:
        text = leading + "{" + ",".join(_dumps(k) + ":" + _dumps(v) for k, v in pairs) + "}"
        header = text.encode("utf-8")
        if pad and len(header) % 8:
            header += b" " * (8 - len(header) % 8)
    if data_len is None:
        data_len = pos
    declared = len(header) if declared_header_len is None else declared_header_len
    p = Path(path)
    _write_file(p, declared, header, data_len, sparse, append_bytes, truncate_to)
    return WrittenFile(path=p, header_len=declared, data_len=data_len, size=p.stat().st_size,
                       offsets=offsets, nbytes=total)


def _header_pairs(specs: list[TensorSpec], metadata: Mapping[str, Any] | None, strict: bool,
                  entry_override: Mapping[str, Any], offsets_override: Mapping[str, Any],
                  duplicate_key: str | tuple[str, Any] | None):
    """The header's (key, entry) pairs with the crafted overrides applied, the true offsets, the data
    length the offsets need, and the sum of tensor sizes."""
    pairs: list[tuple[str, Any]] = []
    if metadata is not None:
        pairs.append(("__metadata__", dict(metadata)))
    offsets: dict[str, tuple[int, int]] = {}
    pos = 0
    total = 0
    for name, dtype, shape in specs:
        n = tensor_nbytes(dtype, shape, strict=strict)
        total += n
        off: Any = [pos, pos + n]
        offsets[name] = (pos, pos + n)
        pos += n
        if name in offsets_override:
            off = offsets_override[name]
        entry: Any = {"dtype": dtype, "shape": list(shape), "data_offsets": off}
        ov = entry_override.get(name)
        if ov is not None:
            if isinstance(ov, Mapping):
                for k, v in ov.items():
                    if v is DELETE:
                        entry.pop(k, None)
                    else:
                        entry[k] = v
            else:
                entry = ov
        pairs.append((name, entry))
        if duplicate_key is not None:
            dup_name, dup_entry = (duplicate_key, entry) if isinstance(duplicate_key, str) else duplicate_key
            if dup_name == name:
                pairs.append((name, dup_entry))
    return pairs, offsets, pos, total


def _write_file(p: Path, declared: int, header: bytes, data_len: int, sparse: bool, append_bytes: bytes,
                truncate_to: int | None) -> None:
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", declared))
        f.write(header)
        end = 8 + len(header) + data_len
        if sparse:
            f.truncate(end)
        else:
            chunk = b"\0" * (1 << 20)
            left = data_len
            while left > 0:
                f.write(chunk[: min(left, len(chunk))])
                left -= min(left, len(chunk))
        if append_bytes:
            f.seek(end)
            f.write(append_bytes)
        if truncate_to is not None:
            f.truncate(truncate_to)


def shard_name(i: int, n: int) -> str:
    """``model-00001-of-00003.safetensors`` (1-based ``i``)."""
    return f"model-{i:05d}-of-{n:05d}.safetensors"


def _write_json(path: Path, value: Any) -> None:
    if isinstance(value, bytes):
        path.write_bytes(value)
    elif isinstance(value, str):
        path.write_text(value, encoding="utf-8")
    else:
        path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def write_checkpoint(
    dir: str | os.PathLike[str],
    *,
    config: Mapping[str, Any] | str | bytes | None = MINIMAL_CONFIG,
    tensors: Tensors,
    shards: int | Mapping[str, str] = 1,
    hf_quant_config: Mapping[str, Any] | str | bytes | None = None,
    index: bool | str | Mapping[str, Any] | str | bytes = "auto",
    sparse: bool = True,
    metadata: Mapping[str, Any] | None = {"format": "pt"},  # noqa: B006 - read only
    total_size: int | None = None,
    shard_options: Mapping[str, Mapping[str, Any]] | None = None,
    extra_files: Mapping[str, str | bytes] | None = None,
) -> Path:
    """Write a checkpoint directory and return its path.

    * ``config`` / ``hf_quant_config``: a dict (written with indent 2), raw text/bytes
      (written verbatim, for invalid-JSON cases) or None (not written).
    * ``shards``: a number of shards (tensors split in order, as evenly as possible by count),
      or ``{tensor: file name}``.
    * ``index``: ``"auto"`` (write one when there is more than one shard), True/False, or a
      dict / text written verbatim as ``model.safetensors.index.json``.
    * ``total_size`` overrides ``metadata.total_size`` in the generated index (default: sum of
      tensor bytes, as huggingface_hub writes it).
    * ``shard_options``: ``{file name: write_safetensors kwargs}`` to break one shard.
    * ``extra_files``: ``{name: content}`` written verbatim next to the rest.
    """
    root = Path(dir)
    root.mkdir(parents=True, exist_ok=True)
    specs = _specs(tensors)
    if isinstance(shards, Mapping):
        files: dict[str, list[TensorSpec]] = {}
        for spec in specs:
            if spec[0] not in shards:
                raise ValueError(f"tensor {spec[0]!r} is not assigned to a shard")
            files.setdefault(shards[spec[0]], []).append(spec)
    else:
        n = max(1, int(shards))
        want_index = index is True or (index == "auto" and n > 1) or not isinstance(index, (bool, str))
        names = ["model.safetensors"] if n == 1 and not want_index else [shard_name(i + 1, n) for i in range(n)]
        files = {name: [] for name in names}
        per, extra = divmod(len(specs), n)
        pos = 0
        for i, name in enumerate(names):
            k = per + (1 if i < extra else 0)
            files[name] = specs[pos:pos + k]
            pos += k
    shard_options = shard_options or {}
    weight_map: dict[str, str] = {}
    nbytes = 0
    for name, group in files.items():
        opts = dict(shard_options.get(name, {}))
        opts.setdefault("metadata", metadata)
        opts.setdefault("sparse", sparse)
        w = write_safetensors(root / name, group, **opts)
        nbytes += w.nbytes
        for t, _, _ in group:
            weight_map[t] = name
    if config is not None:
        _write_json(root / "config.json", config)
    if hf_quant_config is not None:
        _write_json(root / "hf_quant_config.json", hf_quant_config)
    if index == "auto":
        index = len(files) > 1
    if index is True:
        _write_json(root / INDEX_NAME, {
            "metadata": {"total_size": nbytes if total_size is None else total_size},
            "weight_map": dict(sorted(weight_map.items())),
        })
    elif index is not False:
        _write_json(root / INDEX_NAME, index)
    for name, content in (extra_files or {}).items():
        _write_json(root / name, content)
    return root
