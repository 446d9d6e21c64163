"""Per-framework sharding data (``parallel.toml``) and the per-rank layout of a load plan.

``layout(plan, deployment)`` says, for every runtime module of a simulated plan, which dimension
the framework shards and by how many ranks; the DP80x rules and ``ckptlint inspect`` share it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping

from ckptlint._ns import wrap
from ckptlint.hardware import HERE, _compiled
from ckptlint.simulate.model import Dim, Placement

if TYPE_CHECKING:
    from ckptlint.deployment import Deployment
    from ckptlint.simulate import Plan


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


def sharded_dim(rm: Any, fw: Any) -> Dim:
    if rm.loader and rm.loader in fw.sharding:
        return fw.sharding[rm.loader]
    for p in fw.patterns:
        if re.search(p.pattern, rm.name):
            return p.dim
    return fw.kind_sharding.get(rm.kind, "replicated")


def layout(plan: "Plan", deployment: "Deployment") -> dict[str, Placement]:
    """The placement of every runtime module of ``plan`` (keyed like ``plan.modules``)."""
    return placements(plan.modules, for_framework(plan.target.framework), deployment)


def placements(modules: Mapping[str, Any], fw: Any, deployment: "Deployment") -> dict[str, Placement]:
    """How ``deployment`` splits each of ``modules`` (runtime modules by key) under the framework's
    sharding data ``fw`` (None: no data, no placements)."""
    out: dict[str, Placement] = {}
    if fw is None:
        return out
    att = re.compile(fw.dp_attention)
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
            out[name] = Placement(dim, 1 if (dp_att and attention) else tp, 1, attention)
    return out
