"""The rule registry: every rule, explicitly, sorted by code."""

from __future__ import annotations

from ckptlint.rules.base import Rule
from ckptlint.rules.config_regex import ConfigRegexUndecided
from ckptlint.rules.fused_shards_disagree import FusedShardsDisagree
from ckptlint.rules.mtp_draft_forced_unquantized import MtpQuantizedDraftUnquantized
from ckptlint.rules.mtp_layer_count import MtpLayerCountUnsupported
from ckptlint.rules.mtp_weights_missing import MtpWeightsMissing
from ckptlint.rules.quant_config_invalid import QuantConfigInvalid
from ckptlint.rules.quantization_mismatch import QuantizationMismatch
from ckptlint.rules.group_size_indivisible import GroupSizeIndivisible
from ckptlint.rules.quantized_dtype_mismatch import QuantizedDtypeMismatch
from ckptlint.rules.quantized_shape_mismatch import QuantizedShapeMismatch
from ckptlint.rules.scale_missing import ScaleMissing
from ckptlint.rules.shared_expert_fusion import SharedExpertFusionMismatch
from ckptlint.rules.unexpected_tensor import UnexpectedTensor
from ckptlint.rules.tensor_without_module import TensorWithoutModule
from ckptlint.rules.target_support import (GenericSimulation, NotSimulated, TargetNotVerified,
                                           TargetUnsupported)
from ckptlint.rules.container import CONTAINER_RULES
from ckptlint.rules.deployment_shape import DEPLOYMENT_RULES
from ckptlint.rules.memory_fit import GpuMemoryFit

ALL_RULES: tuple[type[Rule], ...] = tuple(sorted(
    (*CONTAINER_RULES, QuantConfigInvalid, ConfigRegexUndecided, QuantizationMismatch, FusedShardsDisagree,
     TargetUnsupported, TargetNotVerified, NotSimulated, GenericSimulation, MtpWeightsMissing, MtpQuantizedDraftUnquantized, MtpLayerCountUnsupported,
     ScaleMissing, UnexpectedTensor, SharedExpertFusionMismatch, QuantizedShapeMismatch, QuantizedDtypeMismatch, GroupSizeIndivisible,
     TensorWithoutModule, *DEPLOYMENT_RULES, GpuMemoryFit),
    key=lambda r: r.code,
))


def get_rule(code_or_name: str) -> type[Rule] | None:
    key = code_or_name.strip()
    for r in ALL_RULES:
        if r.code == key.upper() or r.name == key.lower():
            return r
    return None
