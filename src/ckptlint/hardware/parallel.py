"""Per-framework sharding data (``parallel.toml``) and the per-rank layout of a load plan.

``layout(plan, deployment)`` says, for every runtime module of a simulated plan, which dimension
the framework shards and by how many ranks; the DP80x rules and ``ckptlint inspect`` share it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping

from ckptlint._ns import wrap
from ckptlint.fsutil import read_package_file
from ckptlint.hardware import HERE, _compiled
from ckptlint.simulate.model import Dim, Placement

if TYPE_CHECKING:
    from ckptlint.deployment import Deployment
    from ckptlint.simulate import Plan


def validate_parallel_data() -> Any:
    import tomllib

    from ckptlint.hardware.schema import ParallelData

    return ParallelData.model_validate(tomllib.loads(read_package_file(os.path.join(HERE, "parallel.toml")).decode("utf-8")))


@lru_cache(maxsize=1)
def parallel_data() -> Any:
    compiled = _compiled()
    return wrap(compiled["parallel"]) if compiled is not None else validate_parallel_data()


def for_framework(framework: str) -> Any:
    return parallel_data().frameworks.get(framework)


def sharded_dim(rm: Any, fw: Any) -> Dim:
    if rm.loader and rm.loader in fw.sharding:
        return fw.sharding[rm.loader]
    for p in fw.patterns:
        if re.search(p.pattern, rm.name):
            return p.dim
    return fw.kind_sharding.get(rm.kind, "replicated")


def layout(plan: "Plan", deployment: "Deployment", config: Mapping[str, Any] | None = None) -> dict[str, Placement]:
    """The placement of every runtime module of ``plan`` (keyed like ``plan.modules``)."""
    return placements(plan.modules, for_framework(plan.target.framework), deployment, config)


def _count(config: Mapping[str, Any], key: str) -> int | None:
    v = config.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def qkv_heads(fw: Any, config: Mapping[str, Any] | None) -> tuple[int, int, int] | None:
    """(q heads, k/v heads, head dim) of a QKVParallelLinear from config.json (``fw.qkv`` keys)."""
    q = fw.qkv if fw is not None else None
    if q is None or not isinstance(config, Mapping):
        return None
    heads = _count(config, q.heads_key)
    if heads is None:
        return None
    kv = _count(config, q.kv_heads_key) or heads
    hidden = _count(config, q.hidden_key)
    hd = _count(config, q.head_dim_key) or (hidden // heads if hidden and hidden % heads == 0 else None)
    return (heads, kv, hd) if hd else None


def head_split(heads: tuple[int, int, int], tp: int) -> tuple[int, int] | None:
    """(q heads, k/v heads) per rank of a QKVParallelLinear at TP ``tp`` (k/v heads replicated when
    there are fewer than ranks); None when the heads do not split (the attention asserts)."""
    q, kv, _ = heads
    if q % tp:
        return None
    if tp >= kv:
        return (q // tp, 1) if tp % kv == 0 else None
    return (q // tp, kv // tp) if kv % tp == 0 else None


def placements(modules: Mapping[str, Any], fw: Any, deployment: "Deployment",
               config: Mapping[str, Any] | None = None) -> dict[str, Placement]:
    """How ``deployment`` splits each of ``modules`` (runtime modules by key) under the framework's
    sharding data ``fw`` (None: no data, no placements); ``config`` (config.json) gives the head
    counts of QKVParallelLinear modules."""
    out: dict[str, Placement] = {}
    if fw is None:
        return out
    att = re.compile(fw.dp_attention)
    qkv = re.compile(fw.qkv.modules) if fw.qkv is not None else None
    heads = qkv_heads(fw, config)
    tp, ep = max(1, deployment.tp), max(1, getattr(deployment, "ep", 1) or 1)
    dp_att = bool(getattr(deployment, "dp_attention", False))
    for name, rm in modules.items():
        dim = sharded_dim(rm, fw)
        attention = bool(att.search(name))
        if dim == "moe":
            out[name] = Placement(dim, max(1, tp // ep), ep, attention)
        elif dim == "replicated":
            out[name] = Placement(dim, 1, 1, attention)
        else:
            h = heads if (dim == "out" and qkv is not None and heads and qkv.search(rm.name)) else None
            out[name] = Placement(dim, 1 if (dp_att and attention) else tp, 1, attention, h)
    return out
