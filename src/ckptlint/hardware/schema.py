"""Strict schema of ``gpus.toml`` (validated by ``ckptlint.targets.compile`` and the tests)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Level = Literal["native", "fallback", "emulated", "unsupported", "unknown"]
_UNIT_BYTES = {"GB": 10**9, "GiB": 2**30}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Support(_Strict):
    level: Level
    note: str
    source: str


class Architecture(_Strict):
    like: str | None = None
    platform: Literal["cuda", "rocm"]
    fp8_dtype: Literal["e4m3fn", "e4m3fnuz"]
    source: str
    # format key -> framework ("sglang" | "vllm" | "all") -> support
    support: dict[str, dict[Literal["all", "sglang", "vllm"], Support]] = Field(default_factory=dict)


class Gpu(_Strict):
    key: str = ""
    name: str
    vendor: Literal["amd", "nvidia"]
    architecture: str
    memory: float
    memory_unit: Literal["GB", "GiB"]
    memory_kind: str
    source: str

    @property
    def memory_bytes(self) -> int:
        return int(self.memory * _UNIT_BYTES[self.memory_unit])

    @property
    def label(self) -> str:
        """How findings name the GPU, e.g. ``NVIDIA B200 (sm100)``."""
        return f"{self.name} ({self.architecture})"


class GpuData(_Strict):
    schema_: int = Field(alias="schema")
    gpus: dict[str, Gpu]
    architectures: dict[str, Architecture]
    # The GPU a check assumes by default: "SCHEME:METHOD" or "SCHEME" (ckptlint.quant.schemes names)
    # -> a key of ``gpus``; "default" for every other format.
    native: dict[str, str]




# --- parallel.toml -----------------------------------------------------------------------------
Dim = Literal["out", "in", "replicated", "vocab", "moe"]


class PatternRule(_Strict):
    pattern: str
    dim: Dim


class GroupErrorScheme(_Strict):
    method: str
    scheme: str


class QkvHeads(_Strict):
    """How a QKVParallelLinear splits its heads: q heads over the TP ranks, k/v heads too when there
    are at least as many as ranks, else every rank holds one whole k/v head (replicated)."""

    modules: str  # regex on the runtime module name
    q_shards: list[str]  # stacked shard names holding the q projection
    kv_shards: list[str]  # ... the k and v projections
    heads_key: str = "num_attention_heads"  # config.json keys
    kv_heads_key: str = "num_key_value_heads"  # absent: as many as heads
    head_dim_key: str = "head_dim"  # absent: hidden_size / num_attention_heads
    hidden_key: str = "hidden_size"
    heads_error: str  # what the model's attention prints when the heads do not split
    source: str


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
    # the quant (method, scheme) pairs whose layers raise group_error (others divide silently)
    group_error_schemes: list[GroupErrorScheme] = Field(default_factory=list)
    group_source: str
    qkv: QkvHeads | None = None
    kv_cache_error: str = ""
    kv_cache_source: str = ""
    oom_error: str = ""


class ParallelData(_Strict):
    schema_: int = Field(alias="schema")
    frameworks: dict[str, FrameworkParallel]


