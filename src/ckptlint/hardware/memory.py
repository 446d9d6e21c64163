"""Weight bytes and GPU memory: what each GPU holds of a load plan under a TP/EP layout, and whether
the weights, the runtime reserve and the KV cache fit in its memory.

Shared by ``ckptlint inspect`` (:mod:`ckptlint.inspect`, which documents the arithmetic) and rule
DP806 (gpu-memory-fit), so that both report the same numbers. The layout is
``hardware/parallel.toml`` (:func:`ckptlint.hardware.parallel.layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptlint.checkpoint import DTYPE_BITS, TensorInfo
from ckptlint.hardware.parallel import layout

if TYPE_CHECKING:
    from ckptlint.deployment import Deployment

DEFAULT_RESERVE_FRACTION = 0.08
# The KV cache must get at least this share of the GPU's memory (after weights and reserve) for a
# deployment to count as fitting: below it the server starts with room for few sequences, or (vLLM)
# refuses to start when one sequence of the model's max length does not fit. ``--kv-cache-fraction``.
DEFAULT_KV_CACHE_FRACTION = 0.10


def tensor_bytes(t: TensorInfo) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n * DTYPE_BITS.get(t.dtype, 0) // 8


@dataclass(frozen=True)
class MemoryFit:
    """What one GPU holds under the deployment: weights, the runtime reserve, and the KV cache left.

    ``status``: "fits" (the KV cache gets at least ``kv_needed_bytes``), "tight" (it gets less but
    more than nothing), "no-kv-cache" (the weights fit but leave nothing for the KV cache) or
    "weights-exceed" (the weights alone do not fit)."""

    gpu_label: str
    memory_bytes: int
    weights_bytes: int
    reserve_bytes: int
    kv_cache_bytes: int
    kv_needed_bytes: int
    kv_fraction: float
    status: str

    @property
    def fits(self) -> bool:
        return self.status == "fits"


def memory_fit(gpu, weights_bytes: int, reserve_bytes: int | None = None,
               kv_fraction: float | None = None) -> MemoryFit:
    memory = gpu.memory_bytes
    reserve = reserve_bytes if reserve_bytes is not None else round(memory * DEFAULT_RESERVE_FRACTION)
    fraction = DEFAULT_KV_CACHE_FRACTION if kv_fraction is None else kv_fraction
    kv = memory - weights_bytes - reserve
    needed = round(memory * fraction)
    status = ("weights-exceed" if weights_bytes > memory else "no-kv-cache" if kv <= 0 else
              "tight" if kv < needed else "fits")
    return MemoryFit(gpu.label, memory, weights_bytes, reserve, kv, needed, fraction, status)


def module_bytes(rm) -> int:
    """The bytes of every tensor of a runtime module's shards."""
    return sum(tensor_bytes(t) for s in rm.shards for t in s.tensors)


def per_gpu_weights(plan, deployment: Deployment) -> tuple[float, float, set[str]]:
    """(replicated bytes, sharded bytes per GPU, names of the tensors the plan loads) for a
    simulated plan under the deployment's TP/EP layout (``hardware/parallel.toml``)."""
    lay = layout(plan, deployment)
    seen: set[str] = set()
    replicated = sharded = 0.0
    for name, rm in plan.modules.items():
        mbytes = module_bytes(rm)
        seen.update(t.name for s in rm.shards for t in s.tensors)
        p = lay.get(name)
        if p is None or p.dim == "replicated" or (p.tp <= 1 and p.ep <= 1):
            replicated += mbytes
        elif p.dim == "moe":
            experts = len({s.expert for s in rm.shards if s.expert is not None}) or 1
            local = -(-experts // p.ep)
            sharded += mbytes * local / experts / p.tp
        else:
            sharded += mbytes / p.tp
    return replicated, sharded, seen
