from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import Rule, RuleContext

# How the finding names each Architecture field taken from the extracted class facts.
_FACT_WORDS = {
    "stacked": "fused shards of load_weights",
    "packed_modules_mapping": "packed_modules_mapping",
    "packed_modules_mapping_if": "packed_modules_mapping added in __init__",
    "experts": "expert naming",
    "kinds": "sub-layers and their quant config",
    "rename": "name-mapper renames",
    "quant_rename": "quant-config prefixes that differ from the attribute path",
    "absent": "blocks it does not build",
    "unexpected": "what load_weights does with other names it has no parameter for",
}


class ExtractedSimulation(Rule):
    """
    ## What it does
    Says, once per target, that the checkpoint's architecture has no hand-written entry in the target
    data and was simulated from the facts ckptlint extracted from that release's wheel for the model
    class the release registers for it: its fused shards (`packed_modules_mapping`, the stacked table
    of `load_weights`), its expert naming, its name-mapper renames, which sub-layers it builds
    without the quant config, and the quant-config prefix of a sub-layer whose prefix is not its
    attribute path (the name the skip lists are tested against), and, where its `load_weights` has the
    common loop shape, whether a name no stacked or expert row matched is indexed into `params_dict`
    without a membership test (a KeyError at load) or skipped. It names the class, the facts used, and
    what was left to the generic rules (the loader's handling of names without a parameter where that
    was not read, and always of fused-shard and expert names; anything computed at run time).

    ## Why is this bad?
    It is not a defect: it tells how much the verdict rests on. Extracted facts are the release's own
    declarations, read from its source, so fusions, expert names and unquantized sub-layers are exact;
    what a loader does with an unexpected tensor is read only for the common shape of its other-names
    branch, and anything the class computes at run time still follows the generic rules, so a clean
    result there is weaker evidence than for a hand-modelled architecture.

    ## Example
    A `MiniMaxM2ForCausalLM` FP8 checkpoint checked against `sglang==0.5.23`: simulated from
    `sglang.srt.models.minimax_m2:MiniMaxM2ForCausalLM` (q/k/v and gate/up fusions, experts
    `block_sparse_moe.experts.N.w1/w3/w2`, `block_sparse_moe.gate` and `lm_head` built without the
    quant config). A `PhiMoEForCausalLM` FP8 checkpoint on `sglang==0.5.23`: its `load_weights` indexes
    other names unguarded, so a router stored FP8 (a `weight_scale_inv` the unquantized router has no
    parameter for) is a KeyError at load, not the generic "warn and skip".

    ## How to fix
    Nothing to fix in the checkpoint. To model the loader's strictness too, add a hand-written entry
    for the architecture to the target data; it is layered over the extracted facts.
    """

    code = "TG605"
    name = "extracted-simulation"
    summary = "The architecture was simulated from facts extracted from the release's wheel"
    consequences = (Consequence.HYGIENE,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or plan.extracted is None or not plan.simulated:
            return
        used = [w for k, w in _FACT_WORDS.items() if k in plan.extracted_facts]
        msg = (mention(plan.target.resolved) + f" data has no hand-written entry for {plan.arch_name}: simulated from the "
               f"facts extracted from the release's class {plan.extracted} ("
               + (", ".join(used) if used else "no loading facts") + "); generic rules for the rest "
               + ("(what the loader does with fused-shard and expert names without a parameter, norms and embeddings)"
                  if "unexpected" in plan.extracted_facts else
                  "(what the loader does with names without a parameter, norms and embeddings)"))
        if plan.hand_facts:
            msg += "; hand-written data on top: " + ", ".join(plan.hand_facts)
        if plan.extracted_notes:
            shown = list(plan.extracted_notes[:3])
            more = len(plan.extracted_notes) - len(shown)
            msg += "; not modelled: " + "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")
        data = {"class": plan.extracted, "extracted": list(plan.extracted_facts),
                "hand": list(plan.hand_facts), "generic_notes": list(plan.extracted_notes)}
        yield self.finding(ctx, Consequence.HYGIENE, msg, file="config.json", data=data)
