"""Storage formats for the synthetic layouts: how a module is written as tensors (name, dtype, shape)
in each quantization format (``STORES``). The layouts follow
docs/frameworks/formats.md#quantized-tensor-layouts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Tensor = tuple[str, str, tuple[int, ...]]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Module:
    path: str  # checkpoint module path
    shape: tuple[int, ...]  # logical [N, K] for linears, [H] for norms
    category: str  # attn | dense_mlp | router | expert | shared_expert | norm | embed | lm_head | mtp_proj | plain | bias
    layer: int | None = None


def store_bf16(m: Module) -> list[Tensor]:
    if m.category == "bias":
        return [(m.path, "F32", m.shape)]
    return [(f"{m.path}.weight", "BF16", m.shape)]


def store_mxfp4(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "U8", (n, k // 2)), (f"{m.path}.weight_scale", "U8", (n, cdiv(k, 32)))]


def store_nvfp4(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "U8", (n, k // 2)), (f"{m.path}.weight_scale", "F8_E4M3", (n, cdiv(k, 16))),
            (f"{m.path}.weight_scale_2", "F32", ()), (f"{m.path}.input_scale", "F32", ())]


def store_fp8_block(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "F8_E4M3", (n, k)), (f"{m.path}.weight_scale_inv", "F32", (cdiv(n, 128), cdiv(k, 128)))]


STORES: dict[str, Callable[[Module], list[Tensor]]] = {
    "bf16": store_bf16, "mxfp4": store_mxfp4, "nvfp4": store_nvfp4, "fp8_block": store_fp8_block,
}


def store_ct_w4a16(m: Module, group: int = 128) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight_packed", "I32", (n, cdiv(k, 8))), (f"{m.path}.weight_scale", "BF16", (n, cdiv(k, group))),
            (f"{m.path}.weight_shape", "I64", (2,))]


def store_ct_fp8_channel(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "F8_E4M3", (n, k)), (f"{m.path}.weight_scale", "BF16", (n, 1))]


def store_ct_nvfp4(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight_packed", "U8", (n, k // 2)), (f"{m.path}.weight_scale", "F8_E4M3", (n, cdiv(k, 16))),
            (f"{m.path}.weight_global_scale", "F32", (1,)), (f"{m.path}.input_global_scale", "F32", (1,))]


def store_gptq(m: Module, group: int = 128, bits: int = 4) -> list[Tensor]:
    n, k = m.shape
    g = cdiv(k, group) if group > 0 else 1
    return [(f"{m.path}.qweight", "I32", (k * bits // 32, n)), (f"{m.path}.qzeros", "I32", (g, n * bits // 32)),
            (f"{m.path}.scales", "F16", (g, n)), (f"{m.path}.g_idx", "I32", (k,))]


def store_awq(m: Module, group: int = 128, bits: int = 4) -> list[Tensor]:
    n, k = m.shape
    g = cdiv(k, group)
    return [(f"{m.path}.qweight", "I32", (k, n * bits // 32)), (f"{m.path}.qzeros", "I32", (g, n * bits // 32)),
            (f"{m.path}.scales", "F16", (g, n))]


def store_fp8_tensor(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "F8_E4M3", (n, k)), (f"{m.path}.weight_scale", "F32", ()),
            (f"{m.path}.input_scale", "F32", ())]


STORES.update({"ct_w4a16": store_ct_w4a16, "ct_fp8_channel": store_ct_fp8_channel, "ct_nvfp4": store_ct_nvfp4,
               "gptq": store_gptq, "awq": store_awq, "fp8_tensor": store_fp8_tensor})
