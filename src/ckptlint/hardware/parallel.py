"""Per-framework sharding data (``parallel.toml``) and the per-rank layout of a load plan.

``layout(plan, deployment)`` says, for every runtime module of a simulated plan, which dimension
the framework shards and by how many ranks; the DP80x rules and ``ckptlint inspect`` share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from ckptlint._ns import wrap
from ckptlint.hardware import HERE, _compiled

if TYPE_CHECKING:
    from ckptlint.deployment import Deployment
    from ckptlint.simulate import Plan, RuntimeModule

Dim = Literal["out", "in", "replicated", "vocab", "moe"]


def validate_parallel_data() -> Any:
    import tomllib

    from ckptlint.hardware.schema import ParallelData

    return ParallelData.model_validate(tomllib.loads((HERE / "parallel.toml").read_text(encoding="utf-8")))


@lru_cache(maxsize=1)
def parallel_data() -> Any:
    compiled = _compiled()
    return wrap(compiled["parallel"]) if compiled is not None else validate_parallel_data()


def for_framework(framework: str) -> Any:
    return parallel_data().frameworks.get(framework)


@dataclass
class Placement:
    module: "RuntimeModule"
    dim: Dim
    tp: int  # ranks the module's N/K/vocab/intermediate is split over (1: not split)
    ep: int  # ranks whole experts are split over (MoE only)
    attention: bool = False


def sharded_dim(rm: "RuntimeModule", fw: Any) -> Dim:
    if rm.loader and rm.loader in fw.sharding:
        return fw.sharding[rm.loader]
    for p in fw.patterns:
        if re.search(p.pattern, rm.name):
            return p.dim
    return fw.kind_sharding.get(rm.kind, "replicated")


def layout(plan: "Plan", deployment: "Deployment") -> dict[str, Placement]:
    fw = for_framework(plan.target.framework)
    out: dict[str, Placement] = {}
    if fw is None:
        return out
    att = re.compile(fw.dp_attention)
    tp, ep = max(1, deployment.tp), max(1, getattr(deployment, "ep", 1) or 1)
    dp_att = bool(getattr(deployment, "dp_attention", False))
    for name, rm in plan.modules.items():
        dim = sharded_dim(rm, fw)
        attention = bool(att.search(name))
        if dim == "moe":
            out[name] = Placement(rm, dim, max(1, tp // ep), ep, attention)
        elif dim == "replicated":
            out[name] = Placement(rm, dim, 1, 1, attention)
        else:
            out[name] = Placement(rm, dim, 1 if (dp_att and attention) else tp, 1, attention)
    return out
