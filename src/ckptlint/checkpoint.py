"""The in-memory view of a checkpoint: what the reader produced, never tensor data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ckptlint.findings import Finding

FLOAT_DTYPES = frozenset({"BF16", "F16", "F32", "F64"})

# Bits per element of every safetensors dtype code (safetensors `enum Dtype`).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}

# torch spelling of safetensors dtype codes, for quoting framework error messages.
TORCH_DTYPE: dict[str, str] = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn", "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz", "I16": "int16", "U16": "uint16", "F16": "float16",
    "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32", "C64": "complex64",
    "F64": "float64", "I64": "int64", "U64": "uint64", "F4": "float4_e2m1fn_x2",
}


class TensorInfo(NamedTuple):
    """One tensor as a header describes it. A named tuple: the reader builds hundreds of thousands
    of them, and a tuple can be built in bulk without running Python code per tensor."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str  # shard file name, relative to the checkpoint root

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES


@dataclass(slots=True)
class ShardInfo:
    file: str  # relative to the checkpoint root
    size: int  # file size in bytes (sparse files count their apparent size)
    header_len: int | None = None
    n_tensors: int = 0
    bytes_read: int = 0
    data_bytes: int = 0  # sum of tensor byte lengths per the header


class Texts(dict):
    """JSON file name -> its text, for pointing findings at a line. An ASCII file may be held as its
    bytes, decoded on first use (``get``, ``[]``): the index of a big checkpoint is read to compare
    it with the headers and rarely pointed at, and decoding it costs a second copy (8.8 MB at
    DeepSeek-V3 scale)."""

    def __getitem__(self, name: str) -> str:
        value = dict.__getitem__(self, name)
        if type(value) is bytes:
            value = value.decode("ascii")
            dict.__setitem__(self, name, value)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def length(self, name: str) -> int | None:
        """The text's length in characters, without decoding it (None: not held)."""
        value = dict.get(self, name)
        return None if value is None else len(value)


@dataclass
class Checkpoint:
    """Everything ckptlint knows about a checkpoint, read from its JSON files and headers."""

    root: str  # the path as the user gave it
    config: dict[str, Any] | None = None
    hf_quant_config: dict[str, Any] | None = None
    index: dict[str, Any] | None = None  # parsed model.safetensors.index.json
    index_file: str | None = None
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    shards: dict[str, ShardInfo] = field(default_factory=dict)
    # Problems found while reading (container, index, config syntax). Rules surface them.
    issues: list[Finding] = field(default_factory=list)
    # Raw text of the JSON files, to locate findings at a line (SARIF regions).
    texts: Texts = field(default_factory=Texts)
    is_single_file: bool = False
    # Target-independent derived data (module grouping, stored forms), computed once per checkpoint
    # and shared by every simulated target.
    cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def bytes_read(self) -> int:
        return sum(s.bytes_read for s in self.shards.values())
