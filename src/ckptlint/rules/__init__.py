"""The rule registry: every rule, explicitly, sorted by code.

``ALL_RULES`` is built on first use: the reader declares its rules next to their detection (in
:mod:`ckptlint.reader`) and imports :mod:`ckptlint.rules.base` while it loads, which must not
import every simulation rule first (nor import the reader back).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ckptlint.rules.base import Rule


@cache
def _all_rules() -> tuple[type[Rule], ...]:
    from ckptlint.reader import READER_RULES
    from ckptlint.rules.config_regex import ConfigRegexUndecided
    from ckptlint.rules.deployment_shape import DEPLOYMENT_RULES
    from ckptlint.rules.extracted_simulation import ExtractedSimulation
    from ckptlint.rules.fused_shards_disagree import FusedShardsDisagree
    from ckptlint.rules.group_size_indivisible import GroupSizeIndivisible
    from ckptlint.rules.kv_cache_scales import KvScaleIncomplete, KvScaleNotLoaded
    from ckptlint.rules.memory_fit import GpuMemoryFit
    from ckptlint.rules.mtp_draft_forced_unquantized import MtpQuantizedDraftUnquantized
    from ckptlint.rules.mtp_layer_count import MtpLayerCountUnsupported
    from ckptlint.rules.mtp_weights_missing import MtpWeightsMissing
    from ckptlint.rules.quant_config_invalid import QuantConfigInvalid
    from ckptlint.rules.quantization_mismatch import QuantizationMismatch
    from ckptlint.rules.quantized_dtype_mismatch import QuantizedDtypeMismatch
    from ckptlint.rules.quantized_shape_mismatch import QuantizedShapeMismatch
    from ckptlint.rules.scale_missing import ScaleMissing
    from ckptlint.rules.shared_expert_fusion import SharedExpertFusionMismatch
    from ckptlint.rules.target_support import (GenericSimulation, NotSimulated, TargetNotVerified,
                                               TargetUnsupported)
    from ckptlint.rules.tensor_without_module import TensorWithoutModule
    from ckptlint.rules.unexpected_tensor import UnexpectedTensor

    return tuple(sorted(
        (*READER_RULES, QuantConfigInvalid, ConfigRegexUndecided, QuantizationMismatch, FusedShardsDisagree,
         TargetUnsupported, TargetNotVerified, NotSimulated, GenericSimulation, MtpWeightsMissing,
         MtpQuantizedDraftUnquantized, MtpLayerCountUnsupported, ScaleMissing, UnexpectedTensor,
         SharedExpertFusionMismatch, QuantizedShapeMismatch, QuantizedDtypeMismatch, GroupSizeIndivisible,
         TensorWithoutModule, *DEPLOYMENT_RULES, GpuMemoryFit, KvScaleNotLoaded, KvScaleIncomplete,
         ExtractedSimulation),
        key=lambda r: r.code,
    ))


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
