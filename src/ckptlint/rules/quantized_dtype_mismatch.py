from __future__ import annotations

from ckptlint.findings import Consequence
from ckptlint.rules._layout import LayoutRule


class QuantizedDtypeMismatch(LayoutRule):
    """
    ## What it does
    Flags a packed weight or an integer-coded scale (E8M0 exponents, packed codes) whose dtype
    differs from what the scheme allocates while its shape matches. Float scale dtypes that
    frameworks cast harmlessly (BF16 vs F32 per-tensor scales) are not reported.

    ## Why is this bad?
    `param.copy_(loaded)` casts silently when shapes agree: FP8 E5M2 codes read as E4M3, or
    float scales cast into E8M0 exponents, produce wrong values with no error.

    ## Example
    An MXFP4 `weight_scale` stored as `F32` instead of `U8` E8M0 exponents.

    ## How to fix
    Store the tensor in the dtype the scheme uses (`U8`/`F8_E8M0` for MX scales, `F8_E4M3` for
    FP8 weights and NVFP4 block scales).
    """

    code = "SC504"
    name = "quantized-dtype-mismatch"
    summary = "A quantized tensor has the right shape but a dtype the scheme does not use"
    consequences = (Consequence.SILENT_CORRUPTION,)
    kinds = ("dtype",)

    def hint(self, issue):
        return f"store `{issue.shard.ckpt_module}.{issue.suffix}` in the dtype the scheme allocates"
