"""GPU data: architectures, memory and which quant formats each framework runs on them.

``gpus.toml`` (strict schema below: our own data fails loudly) holds one entry per GPU and one per
architecture; every fact carries a ``source``. ``format_key`` maps a checkpoint's quant method and
scheme to the format keys the data uses. Nothing framework-specific is decided here: the levels
come from the data.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Literal

import msgspec

from ckptlint._ns import NS, wrap
from ckptlint.fsutil import read_package_file

Level = Literal["native", "fallback", "emulated", "unsupported", "unknown"]
Gpu = Any  # schema.Gpu or GpuNS
Support = Any
Architecture = Any
FORMAT_KEYS = ("fp8", "fp8_block", "mxfp4", "mxfp4_gptoss", "nvfp4", "mxfp6", "int4")
_UNIT_BYTES = {"GB": 10**9, "GiB": 2**30}


class GpuNS(NS):
    """A GPU entry of the compiled data (same attributes as schema.Gpu)."""

    __slots__ = ()

    @property
    def memory_bytes(self) -> int:
        return int(self["memory"] * _UNIT_BYTES[self["memory_unit"]])

    @property
    def label(self) -> str:
        return f"{self['name']} ({self['architecture']})"


# (os.path, not pathlib: pathlib and what it imports cost a check ~7 ms)
HERE = os.path.dirname(os.path.abspath(__file__))
COMPILED = os.path.join(HERE, "compiled.json")


def _digest() -> str:
    """CRC-32 and length of the data files and schema (a change detector: see targets.data_digest)."""
    import zlib

    crc = size = 0
    for name in ("gpus.toml", "parallel.toml", "schema.py"):
        part = name.encode() + b"\0" + read_package_file(os.path.join(HERE, name)) + b"\0"
        crc = zlib.crc32(part, crc)
        size += len(part)
    return f"crc32:{crc:08x}:{size}"


@lru_cache(maxsize=1)
def _compiled() -> dict[str, Any] | None:
    try:
        doc = msgspec.json.decode(read_package_file(COMPILED))
    except (OSError, ValueError):  # (msgspec.DecodeError is a ValueError)
        return None
    return doc if isinstance(doc, dict) and doc.get("digest") == _digest() else None


def validate_gpu_data() -> Any:
    """Strict validation of gpus.toml (pydantic; the compiler and the tests)."""
    import tomllib

    from ckptlint.hardware.schema import GpuData

    raw = tomllib.loads(read_package_file(os.path.join(HERE, "gpus.toml")).decode("utf-8"))
    for key, g in raw.get("gpus", {}).items():
        g["key"] = key
    data = GpuData.model_validate(raw)
    for key, g in data.gpus.items():
        if g.architecture not in data.architectures:
            raise ValueError(f"gpus.toml: {key} names unknown architecture {g.architecture}")
    for key, a in data.architectures.items():
        if a.like is not None and a.like not in data.architectures:
            raise ValueError(f"gpus.toml: architecture {key} is like unknown {a.like}")
        for fmt in a.support:
            if fmt not in FORMAT_KEYS:
                raise ValueError(f"gpus.toml: architecture {key}: unknown format key {fmt}")
    return data


@lru_cache(maxsize=1)
def gpu_data() -> Any:
    compiled = _compiled()
    if compiled is None:
        return validate_gpu_data()
    data = wrap(compiled["gpus"])
    data["gpus"] = {k: GpuNS(v) for k, v in data["gpus"].items()}
    return data


def get_gpu(name: str) -> Gpu | None:
    key = name.strip().lower().replace("_", "-")
    gpus = gpu_data().gpus
    if key in gpus:
        return gpus[key]
    for g in gpus.values():
        if g.name.lower() == name.strip().lower():
            return g
    return None


def architecture(gpu: Gpu) -> Architecture:
    return gpu_data().architectures[gpu.architecture]


def support(gpu: Gpu, fmt: str, framework: str) -> Support | None:
    """The data's support entry for ``fmt`` on ``gpu`` under ``framework`` (None: no entry)."""
    archs = gpu_data().architectures
    name: str | None = gpu.architecture
    seen: set[str] = set()
    while name is not None and name not in seen:
        seen.add(name)
        arch = archs[name]
        entry = arch.support.get(fmt)
        if entry is not None:
            return entry.get(framework) or entry.get("all")  # type: ignore[call-overload]
        name = arch.like
    return None


def format_key(method: str | None, scheme: str | None) -> str | None:
    """The data's format key for a quant method and scheme name (None: not a format the data covers)."""
    if method == "mxfp4":
        return "mxfp4_gptoss"
    if scheme in ("fp8", "fp8_channel"):
        return "fp8"
    if scheme in ("fp8_block", "mxfp4", "nvfp4", "mxfp6", "int4"):
        return scheme
    return None
