"""Per-framework sharding data (``parallel.toml``) and the per-rank layout of a load plan.

``layout(plan, deployment)`` says, for every runtime module of a simulated plan, which dimension
the framework shards and by how many ranks; the DP80x rules and ``ckptlint inspect`` share it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from ckptlint.deployment import Deployment
    from ckptlint.simulate import Plan, RuntimeModule

Dim = Literal["out", "in", "replicated", "vocab", "moe"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PatternRule(_Strict):
    pattern: str
    dim: Dim


class FrameworkParallel(_Strict):
    verified: str
    source: str
    sharding: dict[str, Dim]
    patterns: list[PatternRule] = Field(default_factory=list)
    kind_sharding: dict[str, Dim]
    dp_attention: str
    dp_attention_source: str
    divisibility_error: str
    divisibility_source: str
    ep_uneven: Literal["error", "allowed"]
    ep_error: str
    ep_source: str
    block_n_error: str
    block_k_error: str
    moe_block_n_error: str
    moe_block_k_error: str
    merged_block_check: Literal["all", "all_but_last"]
    block_source: str
    group_error: str
    group_source: str


class ParallelData(_Strict):
    schema_: int = Field(alias="schema")
    frameworks: dict[str, FrameworkParallel]


@lru_cache(maxsize=1)
def parallel_data() -> ParallelData:
    text = resources.files("ckptlint.hardware").joinpath("parallel.toml").read_text(encoding="utf-8")
    return ParallelData.model_validate(tomllib.loads(text))


def for_framework(framework: str) -> FrameworkParallel | None:
    return parallel_data().frameworks.get(framework)


@dataclass
class Placement:
    module: "RuntimeModule"
    dim: Dim
    tp: int  # ranks the module's N/K/vocab/intermediate is split over (1: not split)
    ep: int  # ranks whole experts are split over (MoE only)
    attention: bool = False


def sharded_dim(rm: "RuntimeModule", fw: FrameworkParallel) -> Dim:
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
