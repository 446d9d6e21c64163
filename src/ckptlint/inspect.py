"""``ckptlint inspect``: what a checkpoint holds and what each GPU holds under a TP/EP layout.

From the headers alone: parameters and bytes by dtype and by quantization scheme, the share of
the model that is quantized, and, under the layout of one target's load plan (which modules the
framework replicates and which it shards, from ``hardware/parallel.toml``), the weight bytes on
each GPU and what is left for the KV cache:

    per-GPU weights = sum over loaded modules of  bytes            (replicated)
                                                  bytes / tp       (column/row/vocab parallel)
                                                  bytes * ceil(E/ep)/E / (tp/ep)   (FusedMoE)
    KV cache left   = GPU memory - per-GPU weights - runtime reserve

The runtime reserve is a stated assumption: by default 8% of the GPU's memory, what vLLM 0.33.0
keeps outside its pool (default ``gpu_memory_utilization = 0.92``, vllm/config/cache.py) for
activations, CUDA graphs and the allocator; ``--reserve-gib`` sets it. Tensors the target does
not load (e.g. MTP layers with speculative decoding off) are not counted on the GPU.

The deployment *fits* when the KV cache left is at least ``DEFAULT_KV_CACHE_FRACTION`` (10%) of
the GPU's memory (``--kv-cache-fraction``): a server whose KV cache is a sliver of the GPU starts
but serves few sequences, or refuses to start (vLLM, when one sequence of the model's max length
does not fit). :func:`memory_fit` (``ckptlint.hardware.memory``) is shared with rule DP806, which reports the same
numbers in ``ckptlint check --gpu/--tp``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ckptlint.checkpoint import Checkpoint, TensorInfo
from ckptlint.deployment import Deployment, default_gpu_key
from ckptlint.hardware import get_gpu
from ckptlint.hardware.memory import (DEFAULT_KV_CACHE_FRACTION, DEFAULT_RESERVE_FRACTION, MemoryFit, memory_fit,
                                      module_bytes, per_gpu_weights, tensor_bytes)
from ckptlint.render.safe import clean as _clean_text
from ckptlint.simulate import simulate

__all__ = ["DEFAULT_KV_CACHE_FRACTION", "DEFAULT_RESERVE_FRACTION", "Inspection", "MemoryFit", "fit_words",
           "inspect_checkpoint", "memory_fit", "per_gpu_weights", "render_json", "render_text", "tensor_bytes"]

_PACKED = {"U8": 2, "I32": 8}  # logical 4-bit values per stored element of packed quantized weights


def _numel(t: TensorInfo) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


@dataclass
class Inspection:
    checkpoint: str
    target: str | None
    gpu: str | None
    gpu_label: str | None
    gpu_memory_bytes: int | None
    tp: int
    ep: int
    dp_attention: bool
    tensors: int = 0
    total_bytes: int = 0
    by_dtype: dict[str, dict[str, int]] = field(default_factory=dict)  # dtype -> {tensors, elements, bytes}
    by_scheme: dict[str, dict[str, int]] = field(default_factory=dict)  # scheme -> {modules, params, bytes}
    quantized_params: int = 0
    weight_params: int = 0
    quantized_bytes: int = 0
    per_gpu_bytes: int | None = None
    per_gpu_replicated_bytes: int | None = None
    per_gpu_sharded_bytes: int | None = None
    not_loaded_bytes: int = 0
    reserve_bytes: int | None = None
    kv_cache_bytes: int | None = None
    fits: bool | None = None  # the KV cache gets at least kv_cache_needed_bytes
    fit: str | None = None  # MemoryFit.status
    kv_cache_needed_bytes: int | None = None
    kv_cache_fraction: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["quantized_share_params"] = self.quantized_params / self.weight_params if self.weight_params else 0.0
        d["quantized_share_bytes"] = self.quantized_bytes / self.total_bytes if self.total_bytes else 0.0
        return d


def _count_schemes(ins: "Inspection", plan) -> None:
    for rm in plan.modules.values():
        mbytes = module_bytes(rm)
        quantized = bool(rm.decision and rm.decision.quantized and rm.decision.scheme)
        params = 0
        for s in rm.shards:
            w = s.stored.weight
            if w is None:
                continue
            n = _numel(w)
            if quantized and w.dtype in _PACKED and rm.decision.scheme.pack != 1:
                n *= rm.decision.scheme.pack
            params += n
        if params:
            ins.weight_params += params
            if quantized:
                ins.quantized_params += params
                ins.quantized_bytes += mbytes
        row = ins.by_scheme.setdefault(rm.decision.scheme.name if quantized else _float_name(rm),
                                       {"modules": 0, "params": 0, "bytes": 0})
        row["modules"] += 1
        row["params"] += params
        row["bytes"] += mbytes


def inspect_checkpoint(ckpt: Checkpoint, target, deployment: Deployment,
                       reserve_bytes: int | None = None, kv_fraction: float | None = None) -> Inspection:
    plan = simulate(ckpt, target, deployment) if (target is not None and ckpt.config is not None) else None
    q = plan.quant if plan is not None else None
    scheme = q.default_scheme.name if q is not None and q.default_scheme is not None else None
    key = default_gpu_key(q.method if q else None, scheme, deployment.platform, deployment.gpu)
    gpu = get_gpu(key) if key else None
    ins = Inspection(ckpt.root, target.id if target is not None else None, gpu.key if gpu else None,
                     gpu.label if gpu else None, gpu.memory_bytes if gpu else None,
                     deployment.tp, deployment.ep, deployment.dp_attention)
    for t in ckpt.tensors.values():
        b = tensor_bytes(t)
        ins.tensors += 1
        ins.total_bytes += b
        row = ins.by_dtype.setdefault(t.dtype, {"tensors": 0, "elements": 0, "bytes": 0})
        row["tensors"] += 1
        row["elements"] += _numel(t)
        row["bytes"] += b

    if plan is None or not plan.simulated:
        ins.notes.append("load not simulated for the target: per-GPU layout counts every tensor as replicated"
                         if plan is not None else "no target: per-GPU layout not computed")
    if plan is not None and plan.simulated:
        _count_schemes(ins, plan)
        replicated, sharded, seen = per_gpu_weights(plan, deployment)
        ins.not_loaded_bytes = sum(tensor_bytes(t) for t in ckpt.tensors.values() if t.name not in seen)
        ins.per_gpu_replicated_bytes = round(replicated)
        ins.per_gpu_sharded_bytes = round(sharded)
        ins.per_gpu_bytes = round(replicated + sharded)
    elif plan is not None:
        ins.per_gpu_bytes = ins.total_bytes
    if gpu is not None and ins.per_gpu_bytes is not None:
        fit = memory_fit(gpu, ins.per_gpu_bytes, reserve_bytes, kv_fraction)
        ins.reserve_bytes, ins.kv_cache_bytes = fit.reserve_bytes, fit.kv_cache_bytes
        ins.kv_cache_needed_bytes, ins.kv_cache_fraction = fit.kv_needed_bytes, fit.kv_fraction
        ins.fits, ins.fit = fit.fits, fit.status
    return ins


def _float_name(rm) -> str:
    dtypes = {s.stored.weight.dtype for s in rm.shards if s.stored.weight is not None}
    return ("unquantized " + "/".join(sorted(dtypes))) if dtypes else "unquantized (no weight)"


def _gib(b: int | float | None) -> str:
    return "-" if b is None else f"{b / 2**30:,.2f} GiB"


def render_text(ins: Inspection) -> str:
    return "\n".join(_clean_text(line) for line in _text_lines(ins)) + "\n"


def _text_lines(ins: Inspection) -> list[str]:
    out = [f"checkpoint  {ins.checkpoint}", f"tensors     {ins.tensors:,}   bytes {ins.total_bytes:,} ({_gib(ins.total_bytes)})", ""]
    out.append(f"{'dtype':<12}{'tensors':>10}{'elements':>20}{'bytes':>22}")
    for dt, r in sorted(ins.by_dtype.items(), key=lambda kv: -kv[1]["bytes"]):
        out.append(f"{dt:<12}{r['tensors']:>10,}{r['elements']:>20,}{r['bytes']:>22,}")
    if ins.by_scheme:
        out += ["", f"{'scheme':<28}{'modules':>9}{'params':>20}{'bytes':>22}"]
        for s, r in sorted(ins.by_scheme.items(), key=lambda kv: -kv[1]["bytes"]):
            out.append(f"{s:<28}{r['modules']:>9,}{r['params']:>20,}{r['bytes']:>22,}")
        share = ins.quantized_params / ins.weight_params if ins.weight_params else 0.0
        out.append(f"quantized: {share:.1%} of weight parameters, "
                   f"{(ins.quantized_bytes / ins.total_bytes if ins.total_bytes else 0):.1%} of bytes")
    out.append("")
    par = f"TP={ins.tp}" + (f", EP={ins.ep}" if ins.ep != 1 else "") + (", DP attention" if ins.dp_attention else "")
    out.append(f"layout      {ins.target or '-'}, {par}, GPU {ins.gpu_label or 'unknown'}")
    if ins.per_gpu_bytes is not None:
        out.append(f"per GPU     weights {_gib(ins.per_gpu_bytes)} (replicated {_gib(ins.per_gpu_replicated_bytes)}, "
                   f"sharded {_gib(ins.per_gpu_sharded_bytes)}); not loaded {_gib(ins.not_loaded_bytes)}")
    if ins.kv_cache_bytes is not None:
        out.append(f"memory      {_gib(ins.gpu_memory_bytes)} - weights - reserve {_gib(ins.reserve_bytes)} "
                   f"= KV cache {_gib(ins.kv_cache_bytes)}: {fit_words(ins)}")
    for n in ins.notes:
        out.append(f"note: {n}")
    return out


def fit_words(ins: Inspection) -> str:
    """The verdict on the memory line: fits / TIGHT / DOES NOT FIT, with the KV-cache headroom."""
    need = f"the KV cache needs {ins.kv_cache_fraction:.0%} of the GPU, {_gib(ins.kv_cache_needed_bytes)}"
    return {"fits": f"fits ({need})",
            "tight": f"TIGHT: {need} (--kv-cache-fraction)",
            "no-kv-cache": "DOES NOT FIT: no memory left for the KV cache",
            "weights-exceed": "DOES NOT FIT: the weights alone exceed the GPU's memory"}.get(ins.fit or "", "-")


def render_json(ins: Inspection) -> str:
    return json.dumps(ins.to_json(), indent=2) + "\n"
