"""What a simulation produces: the frozen ``Plan`` and the records it holds.

Every record is immutable once the plan is built (named tuples, read-only
mappings and tuples): rules read the plan and yield findings; nothing writes into it afterwards.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Mapping, NamedTuple

from ckptlint.checkpoint import TensorInfo

if TYPE_CHECKING:
    from ckptlint.deployment import Deployment
    from ckptlint.findings import Consequence
    from ckptlint.quant import QuantConfig, Scheme
    from ckptlint.targets import Target
    from ckptlint.targets.schema import Architecture, Draft, MethodRules
    from ckptlint.userregex import RegexOutcome

QUANT_SUFFIXES = frozenset({
    "weight_scale", "weight_scale_inv", "weight_scale_2", "input_scale", "weight_packed",
    "qweight", "qzeros", "scales", "weight_zero_point", "weight_global_scale",
    "input_global_scale", "g_idx", "weight_shape",
})
WEIGHT_SUFFIXES = ("weight", "weight_packed", "qweight", "gate_up_proj_blocks", "gate_up_proj")

EMPTY: Mapping[Any, Any] = MappingProxyType({})


class Stored(NamedTuple):
    """What the checkpoint holds for one checkpoint module, as its tensors' (suffix, dtype, shape)
    signature says. One object per distinct signature: the modules stored alike (thousands of
    experts) share it."""

    quantized: bool | None  # None: nothing weight-like stored
    weight: TensorInfo | None  # the weight tensor's suffix (as its name), dtype and shape; file ""
    scales: tuple[str, ...]
    logical_k: int | None = None  # in-features, undoing packing
    logical_n: int | None = None
    sig: tuple = ()  # (suffix, dtype, shape) of every tensor: what layout verdicts depend on

    def describe(self) -> str:
        if self.weight is None:
            return "no weight"
        w = self.weight
        extra = f" + {', '.join(self.scales)}" if self.scales else ""
        return f"{w.dtype} {list(w.shape)}{extra}"


class Shard(NamedTuple):
    """One checkpoint module as a part of a runtime module (a named tuple: built in bulk)."""

    ckpt_module: str  # checkpoint module path (tensor name without parameter suffix)
    query: str  # the name the framework tests in its skip list for this shard
    tensors: list[TensorInfo]
    stored: Stored
    expert: int | None = None
    proj: str | None = None


class SkipEntry(NamedTuple):
    """One entry of a list the target tests modules against, and where it comes from: the config as
    written (``config``), a rewrite the framework makes of a config entry (``framework``: a name
    mapper, a `model.` variant, a draft's copy; ``original`` is the config's text), or inferred
    from the checkpoint's tensors (``inferred``, where the config's list is empty)."""

    text: str
    origin: str  # "config" | "framework" | "inferred"
    source: str  # the config key, or what in the framework produced it
    original: str | None = None  # the config entry it was rewritten from
    applies_to: str = "main"  # "main" | "draft" | "include" (the list of quantized modules)


class Decision(NamedTuple):
    quantized: bool
    reason: str
    entry: str | None = None  # the skip-list entry that matched
    scheme: "Scheme | None" = None
    forced_draft: bool = False
    error: str | None = None  # construction-time error text (e.g. mixed fused shards)
    error_consequence: str | None = None
    conflict: bool = False  # the skip list treats the shards of this fused module differently


class Mismatch(NamedTuple):
    """A shard whose stored form disagrees with the module the target builds for it."""

    shard: Shard
    direction: str  # "quantized-into-unquantized" | "unquantized-into-quantized"
    consequence: "Consequence"
    error_text: str | None
    detail: str
    # the same, said short where the module's stored and built forms say it all
    # ("BF16 [64, 32] stored, U8 [64, 16] allocated"); None: ``detail`` only
    brief: str | None = None


class LayoutIssue(NamedTuple):
    """A quantized module's tensor that is missing, unexpected, mis-named, mis-shaped or mis-typed."""

    kind: str  # missing | unexpected | scale-name | shape | dtype | group
    shard: Shard
    suffix: str
    detail: str
    consequence: "Consequence"
    error_text: str | None = None


Dim = Literal["out", "in", "replicated", "vocab", "moe"]


class Placement(NamedTuple):
    """How the deployment splits one runtime module over its ranks."""

    dim: Dim
    tp: int  # ranks the module's N/K/vocab/intermediate is split over (1: not split)
    ep: int  # ranks whole experts are split over (MoE only)
    attention: bool = False
    # a QKVParallelLinear whose head counts config.json gives: (q heads, k/v heads, head dim)
    heads: tuple[int, int, int] | None = None


class RuntimeModule(NamedTuple):
    """One module the target builds, with everything the rules judge it by."""

    name: str
    kind: str
    loader: str | None
    role: str  # "main" | "draft" | "extra"
    shards: tuple[Shard, ...]
    decision: Decision | None = None
    fused_into: str | None = None  # shared expert loaded into this FusedMoE (shared-experts fusion)
    # the first shard of each stored signature (shards stored alike share one verdict)
    firsts: Mapping[tuple, Shard] = EMPTY
    mismatches: tuple[Mismatch, ...] = ()  # stored form vs. the built module, per shard
    layout_issues: tuple[LayoutIssue, ...] = ()  # of a module built and stored quantized
    # a fused shared expert judged as one more routed expert of ``fused_into``
    fusion_mismatches: tuple[Mismatch, ...] = ()
    fusion_layout_issues: tuple[LayoutIssue, ...] = ()
    placement: Placement | None = None

    @property
    def tensors(self) -> list[str]:
        return [t.name for s in self.shards for t in s.tensors]


class Plan(NamedTuple):
    """How one framework release loads one checkpoint under one deployment."""

    target: "Target"
    deployment: "Deployment"
    arch_name: str | None
    arch: "Architecture | None"
    quant: "QuantConfig | None"
    method: "MethodRules | None"
    modules: Mapping[str, RuntimeModule] = EMPTY
    dropped: Mapping[str, str] = EMPTY  # tensor -> why the target ignores it
    # tensors of checkpoint modules the model class builds nothing for (Architecture.absent), by the
    # outcome of loading them: (pattern, consequence, error, note) -> tensor names
    absent: Mapping[tuple, tuple[str, ...]] = EMPTY
    num_hidden_layers: int | None = None
    mtp_layers: tuple[int, ...] = ()  # the first MAX_LISTED_MTP_LAYERS of them
    mtp_count: int = 0  # MTP layers config.json declares (its count key)
    mtp_count_key: str | None = None
    present_layers: frozenset[int] = frozenset()  # layer indices holding at least one tensor
    unreadable_shards: frozenset[str] = frozenset()  # listed shards whose tensors are unknown
    speculative: bool = False
    draft: "Draft | None" = None
    exclude_key: str | None = None
    exclude_main: tuple[str, ...] = ()
    exclude_entries: tuple[str, ...] = ()  # the skip list as the config writes it
    include: tuple[str, ...] | None = None  # MethodRules.include_key's list (None: every layer is quantized)
    include_inferred: bool = False
    exclude_draft: tuple[str, ...] = ()
    # every entry of exclude_main, exclude_draft and include, with its origin (ckptlint plan)
    skip_entries: tuple[SkipEntry, ...] = ()
    packed: Mapping[str, tuple[str, ...]] = EMPTY  # fused name -> shards, as the method sees them (main model)
    # the model class's packed_modules_mapping for this config.json (Architecture.packed_modules_mapping
    # plus the packed_modules_mapping_if entries whose key is set)
    class_packed: Mapping[str, tuple[str, ...]] = EMPTY
    renames: Any = None  # the architecture's and the draft's name mappers (ckptlint.simulate.renames.Renames)
    whole_draft_excluded: str | None = None
    assumptions: tuple[str, ...] = ()
    unsupported: str | None = None  # why the framework release cannot load the checkpoint at all
    unsupported_error: str | None = None  # the error it prints then, where the data knows it
    not_simulated: str | None = None  # why ckptlint has no simulation for it (no data: not a verdict)
    gpu: str | None = None  # the assumed GPU, as the report names it
    platform: str | None = None
    gpu_info: Any = None  # its record in ckptlint/hardware/gpus.toml (None: only a platform is known)
    deployment_text: str | None = None
    generic: bool = False  # simulated with the generic architecture rules
    gpu_arch: str | None = None  # architecture of the assumed GPU (gpus.toml), e.g. "sm100"
    fusion: bool = False  # SGLang shared-experts fusion active
    fusion_reason: str | None = None  # why it is on or off
    float_dtype: str = "BF16"  # the dtype unquantized layers are built in
    parallel: Any = None  # the framework's sharding data (ckptlint/hardware/parallel.toml)
    # a draft linear the target builds with a post-load sentinel check (MethodRules.missing_scale load-error)
    # while the checkpoint stores no weight of the draft layer: (runtime name, Decision); None otherwise
    draft_unloaded: Any = None
    kv_cache: Any = None  # KV-cache scales and dtype (ckptlint.simulate.kvcache.KvCachePlan; None: not simulated)
    # simulated from the facts extracted from the release's wheel (targets.extracted_classes): the class
    # ("module:Class"), the Architecture fields those facts gave, what they leave to the generic rules,
    # and the fields the hand-written data layered on top
    extracted: str | None = None
    extracted_facts: tuple[str, ...] = ()
    extracted_notes: tuple[str, ...] = ()
    hand_facts: tuple[str, ...] = ()
    # --- config regexes (ckptlint.userregex): (pattern, fullmatch?) -> RegexOutcome of each pattern the
    # check had left undecided on some module name when this plan was frozen (rule CF312 reads it)
    undecided_regexes: Mapping[tuple[str, bool], "RegexOutcome"] = EMPTY

    @property
    def simulated(self) -> bool:
        return self.unsupported is None and self.not_simulated is None and self.arch is not None
