"""Predict what happens when a checkpoint module is loaded into the runtime module a target built.

Compares the stored form (dtype, shape, scales) with the parameters the target allocates for
its decision and returns the consequence and the text the framework would print, using the
error templates of the target data.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.checkpoint import TORCH_DTYPE
from ckptlint.findings import Consequence
from ckptlint.simulate import Plan, RuntimeModule, Shard


@dataclass
class Mismatch:
    shard: Shard
    direction: str  # "quantized-into-unquantized" | "unquantized-into-quantized"
    consequence: Consequence
    error_text: str | None
    detail: str


def _shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def runtime_float_dtype(config: dict | None) -> str:
    td = (config or {}).get("torch_dtype") or (config or {}).get("dtype")
    return {"float16": "F16", "float32": "F32"}.get(td, "BF16") if isinstance(td, str) else "BF16"


def predict(plan: Plan, rm: RuntimeModule, shard: Shard, float_dtype: str) -> Mismatch | None:
    d = rm.decision
    st = shard.stored
    if d is None or st.quantized is None or st.weight is None or d.error:
        return None
    loading = plan.target.data.loading
    w = st.weight
    if d.quantized and not st.quantized:
        scheme = d.scheme
        if scheme is None:
            return None
        n, k = (w.shape[-2], w.shape[-1]) if len(w.shape) >= 2 else (None, None)
        if n is None:
            return None
        if scheme.changes_shape:
            pshape = scheme.weight_shape(n, k)
            text = _shape_error(loading, rm, pshape, scheme.weight_dtype, w.shape, w.dtype, k // scheme.pack, k)
            return Mismatch(shard, "unquantized-into-quantized", Consequence.LOAD_ERROR, text,
                            f"{scheme.name} allocates {scheme.weight_dtype} {_shape(pshape)} for the "
                            f"{w.dtype} {_shape(w.shape)} weight")
        return Mismatch(shard, "unquantized-into-quantized", Consequence.SILENT_CORRUPTION, None,
                        f"the {w.dtype} weight is cast into the same-shape {scheme.weight_dtype} parameter "
                        "without error and its scales keep their placeholder values")
    if not d.quantized and st.quantized:
        k_logical = st.logical_k
        if w.dtype in ("U8", "I8", "I32") and k_logical and len(w.shape) >= 2 and k_logical != w.shape[-1]:
            n = w.shape[-2]
            pshape = (n, k_logical)
            text = _shape_error(loading, rm, pshape, float_dtype, w.shape, w.dtype, k_logical, w.shape[-1])
            return Mismatch(shard, "quantized-into-unquantized", Consequence.LOAD_ERROR, text,
                            f"the unquantized layer allocates {float_dtype} {_shape(pshape)} for the packed "
                            f"{w.dtype} {_shape(w.shape)} weight")
        extra = [s for s in st.scales]
        up = loading.unexpected_param
        scale_name = f"{shard.ckpt_module}.{extra[0]}" if extra else None
        if extra and up.consequence == "load-error":
            text = (up.error or "").format(name=_param_name(rm, shard, extra[0]))
            return Mismatch(shard, "quantized-into-unquantized", Consequence.LOAD_ERROR, text,
                            f"the unquantized layer has no parameter for `{scale_name}`")
        return Mismatch(shard, "quantized-into-unquantized", Consequence.SILENT_CORRUPTION,
                        (up.error or "").format(name=_param_name(rm, shard, extra[0])) if extra and up.error else None,
                        f"the {w.dtype} weight is cast into the unquantized {float_dtype} parameter without "
                        "its scales" + (f"; `{scale_name}` is skipped" if scale_name else ""))
    return None


def _param_name(rm: RuntimeModule, shard: Shard, suffix: str) -> str:
    if rm.kind == "moe":
        shard_id = "w2" if shard.proj == "down_proj" else "w13"
        return f"{rm.name}.{shard_id}_{suffix}"
    return f"{rm.name}.{suffix}"


def _shape_error(loading, rm: RuntimeModule, pshape, pdtype: str, lshape, ldtype: str, a: int, b: int) -> str:
    if rm.kind == "moe":
        return loading.moe_shape_mismatch.format(a=a, b=b, dim=len(lshape) - 1)
    tmpl = loading.shape_mismatch.get(rm.loader or "", loading.shape_mismatch.get("default", ""))
    return tmpl.format(pshape=_shape(pshape), pdtype=TORCH_DTYPE.get(pdtype, pdtype.lower()),
                       lshape=_shape(lshape), ldtype=TORCH_DTYPE.get(ldtype, ldtype.lower()))


def suggested_entries(plan: Plan, rm: RuntimeModule) -> list[str]:
    """Skip-list entries under which the target would exclude ``rm`` (runtime naming)."""
    method = plan.method
    if method is None:
        return [rm.name]
    last = rm.name.rpartition(".")[2]
    packed = {**(plan.arch.packed_modules_mapping if plan.arch else {}), **method.packed_extra}
    if rm.kind != "moe" and last in packed and not method.direct_fused_match:
        return [rm.name.replace(last, s) for s in packed[last]]
    return [rm.name]
