"""Quantization schemes and the parameters a framework allocates for them.

Arithmetic lives here (pack factors, scale grids); which scheme a module gets is decided by
the quant config and the target data. Shapes follow checkpoint-formats.md §2 and the
per-scheme table of vllm-loading.md §6: ``N`` = out features, ``K`` = in features.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Scheme:
    name: str  # mxfp4 | nvfp4 | fp8 | fp8_channel | fp8_block | int4 | ...
    weight_dtype: str  # safetensors dtype code of the stored/allocated weight
    pack: int = 1  # logical elements per stored element along K
    group: int | None = None
    block: tuple[int, int] | None = None
    description: str = ""

    @property
    def changes_shape(self) -> bool:
        return self.pack != 1

    def weight_shape(self, n: int, k: int) -> tuple[int, int]:
        return (n, k // self.pack) if self.pack != 1 else (n, k)

    def expected_params(self, n: int, k: int) -> dict[str, tuple[tuple[str, ...], tuple[int, ...] | None]]:
        """suffix -> (accepted dtypes, shape or None when any shape is accepted)."""
        w = {"weight": ((self.weight_dtype,), self.weight_shape(n, k))}
        if self.name == "mxfp4":
            w["weight_scale"] = (("U8", "F8_E8M0"), (n, cdiv(k, 32)))
        elif self.name == "nvfp4":
            w["weight_scale"] = (("F8_E4M3",), (n, cdiv(k, self.group or 16)))
            w["weight_scale_2"] = (("F32",), None)
            w["input_scale"] = (("F32",), None)
        elif self.name == "fp8":
            w["weight_scale"] = (("F32", "BF16", "F16"), None)
        elif self.name == "fp8_block" and self.block:
            bn, bk = self.block
            w["weight_scale_inv"] = (("F32", "BF16", "F8_E8M0", "U8"), (cdiv(n, bn), cdiv(k, bk)))
        return w


SCHEMES: dict[str, Scheme] = {
    "mxfp4": Scheme("mxfp4", "U8", pack=2, group=32, description="MXFP4 (E2M1 packed two per byte, E8M0 scale per 32)"),
    "nvfp4": Scheme("nvfp4", "U8", pack=2, group=16, description="NVFP4 (E2M1 packed, FP8 scale per 16, FP32 global scale)"),
    "fp8": Scheme("fp8", "F8_E4M3", description="FP8 E4M3 per-tensor"),
    "fp8_channel": Scheme("fp8_channel", "F8_E4M3", description="FP8 E4M3 per-channel"),
    "mxfp6": Scheme("mxfp6", "U8", description="MXFP6"),
    "int4": Scheme("int4", "I32", pack=8, description="INT4 packed eight per int32"),
}


def scheme_fp8(block: list[int] | None, static: bool = False) -> Scheme:
    if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block):
        return Scheme("fp8_block", "F8_E4M3", block=(block[0], block[1]),
                      description=f"FP8 E4M3 with {block[0]}x{block[1]} block scales")
    return SCHEMES["fp8"]


def scheme_from_quark_layer(layer: Any) -> Scheme | None:
    """Scheme of a Quark layer config (``{"weight": spec | [spec, spec], ...}``)."""
    if not isinstance(layer, dict):
        return None
    weight = layer.get("weight")
    specs = weight if isinstance(weight, list) else [weight]
    first = specs[0] if specs and isinstance(specs[0], dict) else None
    if first is None:
        return None
    dtype = str(first.get("dtype", "")).lower()
    qscheme = str(first.get("qscheme", "")).lower()
    group = first.get("group_size")
    if dtype == "fp4":
        if len(specs) == 2 and group == 16:
            return SCHEMES["nvfp4"]
        return SCHEMES["mxfp4"]
    if dtype in ("fp6_e3m2", "fp6_e2m3"):
        return SCHEMES["mxfp6"]
    if dtype.startswith("fp8"):
        if qscheme == "per_channel":
            return SCHEMES["fp8_channel"]
        if qscheme == "per_block":
            bs = first.get("block_size") or [128, 128]
            return scheme_fp8(list(bs) if isinstance(bs, (list, tuple)) else None)
        return SCHEMES["fp8"]
    if dtype in ("int4", "uint4"):
        return SCHEMES["int4"]
    return Scheme(dtype or "unknown", "U8", description=f"Quark {dtype}")
