from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.rules.base import Rule, RuleContext


class MtpQuantizedDraftUnquantized(Rule):
    """
    ## What it does
    Flags MTP/NextN layer modules stored quantized when the selected release builds the draft
    model unquantized: always for the checkpoint's quant method (SGLang: ModelOpt NVFP4), or
    because of a skip-list entry (SGLang's Qwen3.5 draft with a Quark `exclude` entry naming an
    MTP module, 0.5.17+; from 0.5.21 only an entry naming the MTP experts).

    ## Why is this bad?
    The draft allocates BF16 parameters with the logical shapes; packed 4-bit weights do not fit
    (FusedMoE: "The size of tensor a (7168) must match the size of tensor b (3584)") and scale
    tensors have no parameter (`KeyError: '…shared_experts.gate_up_proj.input_scale'`, SGLang
    issue #10175).

    ## Example
    An NVFP4 DeepSeek-V3 export whose `model.layers.61.*` MTP layer was quantized too, served
    with SGLang and MTP speculative decoding.

    ## How to fix
    Keep the MTP layer in BF16 when exporting (ModelOpt: exclude `model.layers.61*`), or serve
    without MTP speculative decoding.
    """

    code = "MT702"
    name = "mtp-quantized-draft-unquantized"
    summary = "The MTP layer is stored quantized but the framework builds the draft unquantized"
    consequences = (Consequence.LOAD_ERROR, Consequence.SILENT_CORRUPTION)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated:
            return
        for rm in plan.modules.values():
            d = rm.decision
            if d is None or not d.forced_draft:
                continue
            ms = rm.mismatches
            if not ms:
                continue
            cons = Consequence.LOAD_ERROR if any(m.consequence is Consequence.LOAD_ERROR for m in ms) else ms[0].consequence
            yield self.finding(
                ctx, cons,
                f"`{rm.name}` (draft {rm.loader or rm.kind}) is stored quantized "
                f"({ms[0].shard.stored.describe()}) but {d.reason}; {ms[0].detail}",
                module=rm.name, tensors=[t.name for m in ms for t in m.shard.tensors],
                error_text=ms[0].error_text, assumptions=list(plan.assumptions),
                hint="export the MTP layer unquantized (BF16), or serve without MTP speculative decoding")
