"""Quantization schemes and the checkpoint tensors a framework expects for them.

Arithmetic lives here (pack factors, scale grids); which scheme a module gets is decided by the
quant config and the target data. Layouts follow docs/frameworks/formats.md#quantized-tensor-layouts and the per-scheme
parameter table of docs/frameworks/vllm.md#parameters-per-method. ``N`` = out features, ``K`` = in features of a Linear.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


FLOATS = ("BF16", "F16", "F32")
E8M0 = ("U8", "F8_E8M0")


@dataclass(frozen=True)
class Expect:
    """One checkpoint tensor (by suffix) a quantized module must/may carry."""

    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...] | None  # accepted shapes; None: any
    required: bool = True
    integer_coded: bool = False  # values are codes/exponents: a float dtype here is garbage


@dataclass(frozen=True)
class Scheme:
    name: str  # short label: mxfp4 | nvfp4 | fp8 | fp8_channel | fp8_block | w4a16 | ...
    layout: str  # key of LAYOUTS: how the tensors of one Linear look on disk
    weight_dtype: str  # dtype of the stored weight (codes)
    pack: int = 1  # logical elements per stored element along K (FP4: 2, int4 in int32: 8)
    bits: int | None = None
    group: int | None = None
    block: tuple[int, int] | None = None
    static_input: bool = False
    symmetric: bool = True
    scale_name: str = "weight_scale"
    actorder: bool = False
    description: str = ""
    extra: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def changes_shape(self) -> bool:
        return self.pack != 1 or self.layout in ("gptq", "awq")

    def weight_shape(self, n: int, k: int) -> tuple[int, int]:
        """Shape of the weight parameter the framework allocates (what a BF16 weight meets)."""
        if self.layout == "gptq":
            return (k * (self.bits or 4) // 32, n)
        if self.layout == "awq":
            return (k, n * (self.bits or 4) // 32)
        return (n, k // self.pack) if self.pack != 1 else (n, k)

    def with_(self, **kw: Any) -> "Scheme":
        return replace(self, **kw)

    def expected(self, n: int, k: int, *more: int) -> dict[str, Expect]:
        return LAYOUTS[self.layout](self, n, k, *more)

    def logical_dims(self, stored: dict[str, tuple[str, tuple[int, ...]]]) -> tuple[int, ...] | None:
        """(N, K) from the stored weight, undoing this scheme's packing; None when unknown. gpt-oss
        MXFP4 experts (one fused tensor per projection): (2 * intermediate, hidden, experts)."""
        if self.layout == "gptoss_mxfp4":
            return _gptoss_dims(stored)
        for suffix in ("weight", "weight_packed", "qweight"):
            if suffix in stored:
                shape = stored[suffix][1]
                if len(shape) < 2:
                    return None
                a, b = shape[-2], shape[-1]
                if self.layout == "gptq" and suffix == "qweight":
                    return (b, a * 32 // (self.bits or 4))
                if self.layout == "awq" and suffix == "qweight":
                    return (b * 32 // (self.bits or 4), a)
                if self.layout == "ct_pack" and suffix == "weight_packed":
                    if dict(self.extra).get("dense"):
                        return None  # K is only in the `weight_shape` tensor data, never read
                    return (a, b * (32 // (self.bits or 4)))
                return (a, b * self.pack)
        return None


def _scalar() -> tuple[tuple[int, ...], ...]:
    return ((), (1,))


def _fp8_tensor(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    out = {"weight": Expect(("F8_E4M3",), ((n, k),)), s.scale_name: Expect(FLOATS, _scalar())}
    out["input_scale"] = Expect(FLOATS, _scalar(), required=s.static_input)
    return out


def _fp8_channel(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    out = {"weight": Expect(("F8_E4M3",), ((n, k),)), s.scale_name: Expect(FLOATS, ((n,), (n, 1)))}
    out["input_scale"] = Expect(FLOATS, _scalar(), required=s.static_input)
    return out


def _fp8_block(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    bn, bk = s.block or (128, 128)
    return {"weight": Expect(("F8_E4M3",), ((n, k),)),
            s.scale_name: Expect(FLOATS + E8M0, ((cdiv(n, bn), cdiv(k, bk)),))}


def _mx(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    g = s.group or 32
    return {"weight": Expect(("U8", "F4"), ((n, k // 2), (n, k))),
            "weight_scale": Expect(E8M0, ((n, cdiv(k, g)),), integer_coded=True),
            "input_scale": Expect(FLOATS, _scalar(), required=s.static_input)}


def _nvfp4(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    g = s.group or 16
    return {"weight": Expect(("U8", "F4"), ((n, k // 2), (n, k))),
            "weight_scale": Expect(("F8_E4M3",), ((n, cdiv(k, g)),)),
            "weight_scale_2": Expect(FLOATS, _scalar()),
            "input_scale": Expect(FLOATS, _scalar(), required=s.static_input)}


def _ct_pack(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    bits = s.bits or 4
    per = 32 // bits
    g = s.group if s.group and s.group > 0 else k
    # compressed-tensors >= 0.18 packs 3/5/6/7-bit values densely across int32 words; older
    # versions put floor(32/bits) values per word (docs/frameworks/formats.md#compressed-tensors-int-packing).
    dense = dict(s.extra).get("dense", False)
    cols = cdiv(k * bits, 32) if dense else cdiv(k, per)
    out = {"weight_packed": Expect(("I32",), ((n, cols),)),
           "weight_scale": Expect(FLOATS, ((n, cdiv(k, g)),) if s.group and s.group > 0 else ((n, 1),)),
           "weight_shape": Expect(("I64", "I32"), ((2,),))}
    out["weight_zero_point"] = Expect(("I32",), ((cdiv(n, per), cdiv(k, g)),), required=not s.symmetric)
    out["weight_g_idx"] = Expect(("I32",), ((k,),), required=s.actorder)
    return out


def _ct_float(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    if s.block:
        bn, bk = s.block
        sc = ((cdiv(n, bn), cdiv(k, bk)),)
    elif s.group:
        sc = ((n, cdiv(k, s.group)),)
    elif s.name.endswith("channel"):
        sc = ((n, 1),)  # compressed-tensors writes [N, 1]; a 1-D [N] scale fails vLLM's shape assert (#53105)
    else:
        sc = _scalar()
    dtype = "I8" if s.weight_dtype == "I8" else "F8_E4M3"
    return {"weight": Expect((dtype,), ((n, k),)), "weight_scale": Expect(FLOATS, sc),
            "input_scale": Expect(FLOATS, _scalar(), required=s.static_input)}


def _ct_nvfp4(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    return {"weight_packed": Expect(("U8",), ((n, k // 2),)),
            "weight_scale": Expect(("F8_E4M3",), ((n, cdiv(k, 16)),)),
            "weight_global_scale": Expect(("F32",), _scalar()),
            "input_global_scale": Expect(("F32",), _scalar(), required=s.static_input)}


def _ct_mxfp4(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    return {"weight_packed": Expect(("U8",), ((n, k // 2),)),
            "weight_scale": Expect(E8M0, ((n, cdiv(k, 32)),), integer_coded=True)}


def _gptq(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    bits = s.bits or 4
    g = s.group if s.group and s.group > 0 else k
    groups = cdiv(k, g)
    return {"qweight": Expect(("I32",), ((k * bits // 32, n),)),
            "qzeros": Expect(("I32",), ((groups, n * bits // 32),)),
            "scales": Expect(("F16", "BF16", "F32"), ((groups, n),)),
            # the act-order permutation: a registered parameter, read only with desc_act (group > 0)
            "g_idx": Expect(("I32",), ((k,),), required=s.actorder)}


def _awq(s: Scheme, n: int, k: int) -> dict[str, Expect]:
    bits = s.bits or 4
    g = s.group if s.group and s.group > 0 else k
    return {"qweight": Expect(("I32",), ((k, n * bits // 32),)),
            "qzeros": Expect(("I32",), ((cdiv(k, g), n * bits // 32),)),
            "scales": Expect(("F16", "BF16", "F32"), ((cdiv(k, g), n),))}


def _gptoss_dims(stored: dict[str, tuple[str, tuple[int, ...]]]) -> tuple[int, int, int] | None:
    """(2I, H, E) of gpt-oss MXFP4 experts, each from the first tensor that states it (biases and
    scales before blocks), so that one mis-shaped tensor is judged against the others."""
    def dim(cands: list[tuple[str, int, int]]) -> int | None:
        for suffix, axis, mult in cands:
            shape = stored.get(suffix, (None, ()))[1]
            if len(shape) > axis:
                return shape[axis] * mult
        return None
    e = dim([("gate_up_proj_bias", 0, 1), ("down_proj_bias", 0, 1), ("gate_up_proj_scales", 0, 1),
             ("down_proj_scales", 0, 1), ("gate_up_proj_blocks", 0, 1), ("down_proj_blocks", 0, 1)])
    i2 = dim([("gate_up_proj_bias", 1, 1), ("gate_up_proj_scales", 1, 1), ("gate_up_proj_blocks", 1, 1)])
    h = dim([("down_proj_bias", 1, 1), ("down_proj_scales", 1, 1), ("down_proj_blocks", 1, 1)])
    return (i2, h, e) if i2 and h and e else None


def _gptoss_mxfp4(s: Scheme, i2: int, h: int, e: int = 1) -> dict[str, Expect]:
    # E8M0 exponents and packed E2M1 pairs, 32 values (16 bytes) per block; biases BF16
    i = i2 // 2
    return {"gate_up_proj_blocks": Expect(("U8",), ((e, i2, cdiv(h, 32), 16),)),
            "gate_up_proj_scales": Expect(("U8",), ((e, i2, cdiv(h, 32)),), integer_coded=True),
            "gate_up_proj_bias": Expect(("BF16",), ((e, i2),), required=False),
            "down_proj_blocks": Expect(("U8",), ((e, h, cdiv(i, 32), 16),)),
            "down_proj_scales": Expect(("U8",), ((e, h, cdiv(i, 32)),), integer_coded=True),
            "down_proj_bias": Expect(("BF16",), ((e, h),), required=False)}


LAYOUTS = {
    "fp8_tensor": _fp8_tensor, "fp8_channel": _fp8_channel, "fp8_block": _fp8_block, "mx": _mx,
    "nvfp4": _nvfp4, "ct_pack": _ct_pack, "ct_float": _ct_float, "ct_nvfp4": _ct_nvfp4,
    "ct_mxfp4": _ct_mxfp4, "gptq": _gptq, "awq": _awq, "gptoss_mxfp4": _gptoss_mxfp4,
}

SCHEMES: dict[str, Scheme] = {
    "mxfp4": Scheme("mxfp4", "mx", "U8", pack=2, bits=4, group=32,
                    description="MXFP4 (E2M1 packed two per byte, E8M0 scale per 32)"),
    "nvfp4": Scheme("nvfp4", "nvfp4", "U8", pack=2, bits=4, group=16, static_input=True,
                    description="NVFP4 (E2M1 packed, FP8 scale per 16, FP32 global scale)"),
    "fp8": Scheme("fp8", "fp8_tensor", "F8_E4M3", bits=8, description="FP8 E4M3 per-tensor"),
    "fp8_channel": Scheme("fp8_channel", "fp8_channel", "F8_E4M3", bits=8, description="FP8 E4M3 per-channel"),
    "mxfp6": Scheme("mxfp6", "mx", "U8", bits=6, group=32, description="MXFP6"),
}


def scheme_fp8(block: list[int] | None, static: bool = False, scale_name: str | None = None) -> Scheme:
    if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block):
        return Scheme("fp8_block", "fp8_block", "F8_E4M3", bits=8, block=(block[0], block[1]),
                      scale_name=scale_name or "weight_scale_inv",
                      description=f"FP8 E4M3 with {block[0]}x{block[1]} block scales")
    return SCHEMES["fp8"].with_(static_input=static, scale_name=scale_name or "weight_scale")


def scheme_from_quark_layer(layer: Any, block_scale_name: str = "weight_scale") -> Scheme | None:
    """Scheme of a Quark layer config (``{"weight": spec | [spec, spec], "input_tensors": ...}``)."""
    if not isinstance(layer, dict):
        return None
    weight = layer.get("weight")
    specs = weight if isinstance(weight, list) else [weight]
    first = specs[0] if specs and isinstance(specs[0], dict) else None
    if first is None:
        return None
    inp = layer.get("input_tensors")
    inp0 = (inp[0] if isinstance(inp, list) and inp else inp) if inp else None
    static = isinstance(inp0, dict) and inp0.get("is_dynamic") is False
    dtype = str(first.get("dtype", "")).lower()
    qscheme = str(first.get("qscheme", "")).lower()
    group = first.get("group_size")
    if dtype == "fp4":
        if len(specs) == 2 and group == 16:
            return SCHEMES["nvfp4"]
        return SCHEMES["mxfp4"].with_(static_input=static and str(inp0.get("dtype", "")).startswith("fp8"))
    if dtype in ("fp6_e3m2", "fp6_e2m3"):
        return SCHEMES["mxfp6"]
    if dtype.startswith("fp8"):
        if qscheme == "per_channel":
            return SCHEMES["fp8_channel"].with_(static_input=static)
        if qscheme == "per_block":
            bs = first.get("block_size") or [128, 128]
            return scheme_fp8(list(bs) if isinstance(bs, (list, tuple)) else None, scale_name=block_scale_name)
        return SCHEMES["fp8"].with_(static_input=static)
    if dtype in ("int4", "uint4"):
        return Scheme("int4", "awq", "I32", pack=8, bits=4, group=group if isinstance(group, int) else None,
                      symmetric=dtype == "int4", description="Quark W4A16 INT4 (AWQ layout)")
    return Scheme(dtype or "unknown", "mx", "U8", description=f"Quark {dtype}")
