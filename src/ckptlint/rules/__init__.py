"""The rule catalogue: every rule of ckptlint, by code, in one table.

:data:`CODES` maps each code to the module of this package that declares its class and the class's
name, one line per rule, sorted by code (like ruff's ``codes.rs``). A new rule is one module here
and one line in the table (docs/extending.md, "A new rule").

Every rule class lives in this package. Most carry their detection in ``check(ctx)`` (on the
checkpoint, or on each target's simulated Plan); the container checks (``SF1xx`` shard files, ``IX2xx`` the index and the set of
files, ``CF30x`` config file syntax) are :class:`~ckptlint.rules.base.ReaderRule` classes whose
problems the reader detects while it reads (:mod:`ckptlint.reader` imports their modules to build
the findings). Imports only go down: nothing here imports the reader or the inspector.

The table names modules rather than importing them: the reader imports single rule modules (and so
this package) while it loads, also in the shard-reading child, and must not import every rule with
them. ``ALL_RULES`` and :func:`get_rule` import the modules on first use.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ckptlint.rules.base import Rule

# (code, module in ckptlint.rules, class): every rule once, sorted by code.
CODES: tuple[tuple[str, str, str], ...] = (
    ("CF301", "config_file",                  "ConfigMissing"),
    ("CF302", "config_file",                  "ConfigInvalidJson"),
    ("CF303", "config_file",                  "ConfigNotAnObject"),
    ("CF304", "config_file",                  "ConfigDuplicateKey"),
    ("CF311", "quant_config_invalid",         "QuantConfigInvalid"),
    ("CF312", "config_regex",                 "ConfigRegexUndecided"),
    ("DP801", "deployment_shape",             "GpuFormatSupport"),
    ("DP802", "deployment_shape",             "TensorParallelIndivisible"),
    ("DP803", "deployment_shape",             "Fp8BlockPartition"),
    ("DP804", "deployment_shape",             "GroupPartition"),
    ("DP805", "deployment_shape",             "Fp8FnuzConversion"),
    ("DP806", "memory_fit",                   "GpuMemoryFit"),
    ("IX201", "index_file",                   "IndexInvalidJson"),
    ("IX202", "index_file",                   "IndexInvalidWeightMap"),
    ("IX203", "index_file",                   "IndexInvalidShardName"),
    ("IX204", "index_file",                   "IndexMissingShard"),
    ("IX205", "index_file",                   "IndexTensorNotInShard"),
    ("IX206", "index_file",                   "TensorInMultipleShards"),
    ("IX207", "index_file",                   "TensorNotInIndex"),
    ("IX208", "index_file",                   "IndexTotalSizeMismatch"),
    ("IX209", "index_file",                   "UnreferencedShard"),
    ("IX210", "index_file",                   "NoSafetensorsWeights"),
    ("IX211", "index_file",                   "IndexInvalidMetadata"),
    ("IX212", "index_file",                   "IndexDuplicateKey"),
    ("LD901", "tensor_without_module",        "TensorWithoutModule"),
    ("MT701", "mtp_weights_missing",          "MtpWeightsMissing"),
    ("MT702", "mtp_draft_forced_unquantized", "MtpQuantizedDraftUnquantized"),
    ("MT703", "mtp_layer_count",              "MtpLayerCountUnsupported"),
    ("QD401", "quantization_mismatch",        "QuantizationMismatch"),
    ("QD402", "fused_shards_disagree",        "FusedShardsDisagree"),
    ("QD403", "shared_expert_fusion",         "SharedExpertFusionMismatch"),
    ("SC501", "scale_missing",                "ScaleMissing"),
    ("SC502", "unexpected_tensor",            "UnexpectedTensor"),
    ("SC503", "quantized_shape_mismatch",     "QuantizedShapeMismatch"),
    ("SC504", "quantized_dtype_mismatch",     "QuantizedDtypeMismatch"),
    ("SC505", "group_size_indivisible",       "GroupSizeIndivisible"),
    ("SC506", "kv_cache_scales",              "KvScaleNotLoaded"),
    ("SC507", "kv_cache_scales",              "KvScaleIncomplete"),
    ("SF101", "shard_file",                   "ShardTooSmall"),
    ("SF102", "shard_file",                   "ShardHeaderTooLarge"),
    ("SF103", "shard_file",                   "ShardHeaderBeyondFile"),
    ("SF104", "shard_file",                   "ShardHeaderNotUtf8"),
    ("SF105", "shard_file",                   "ShardHeaderInvalidJson"),
    ("SF106", "shard_file",                   "ShardUnknownDtype"),
    ("SF107", "shard_file",                   "ShardInvalidTensorEntry"),
    ("SF108", "shard_file",                   "ShardInvalidMetadata"),
    ("SF109", "shard_file",                   "ShardInvalidOffsets"),
    ("SF110", "shard_file",                   "ShardTensorSizeMismatch"),
    ("SF111", "shard_file",                   "ShardTensorSizeOverflow"),
    ("SF112", "shard_file",                   "ShardSubByteMisaligned"),
    ("SF113", "shard_file",                   "ShardTruncated"),
    ("SF114", "shard_file",                   "ShardTrailingBytes"),
    ("SF115", "shard_file",                   "ShardDuplicateKey"),
    ("SF116", "shard_file",                   "GitLfsPointer"),
    ("SF117", "shard_file",                   "ShardUnreadable"),
    ("SF118", "shard_file",                   "ShardSpecDeviation"),
    ("TG601", "target_support",               "TargetUnsupported"),
    ("TG602", "target_support",               "TargetNotVerified"),
    ("TG603", "target_support",               "NotSimulated"),
    ("TG604", "target_support",               "GenericSimulation"),
    ("TG605", "extracted_simulation",         "ExtractedSimulation"),
)


@cache
def _all_rules() -> tuple[type[Rule], ...]:
    # (``__import__``, the import statement's own path, so that ``-X importtime`` lists these modules)
    return tuple(getattr(__import__(f"{__name__}.{module}", fromlist=(cls,)), cls) for _, module, cls in CODES)


def __getattr__(name: str) -> Any:
    if name == "ALL_RULES":
        return _all_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_rule(code_or_name: str) -> type[Rule] | None:
    key = code_or_name.strip()
    for r in _all_rules():
        if r.code == key.upper() or r.name == key.lower():
            return r
    return None
