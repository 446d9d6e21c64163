"""``ckptlint plan``: the per-module decision table, the view a user reaches for when a finding surprises."""

from __future__ import annotations

import json

from ckptlint.findings import natural_key
from ckptlint.simulate import Plan


def render_plan(plan: Plan, module_filter: str | None = None, json_out: bool = False) -> str:
    rows = []
    for rm in sorted(plan.modules.values(), key=lambda m: (m.role != "main", natural_key(m.name))):
        if module_filter and module_filter not in rm.name:
            continue
        d = rm.decision
        decision = ("quantized " + (d.scheme.name if d.scheme else "")) if d and d.quantized else "unquantized" if d else "-"
        st = rm.shards[0].stored if rm.shards else None
        stored = ("-" if st is None or st.quantized is None else
                  ("quantized " if st.quantized else "unquantized ") + st.describe())
        if len(rm.shards) > 1:
            n_q = sum(1 for s in rm.shards if s.stored.quantized)
            stored += f" ({len(rm.shards)} shards, {n_q} quantized)"
        rows.append({"role": rm.role, "module": rm.name, "kind": rm.kind, "loader": rm.loader,
                     "decision": decision.strip(), "reason": d.reason if d else "no quant config",
                     "error": d.error if d else None, "stored": stored,
                     "checkpoint_modules": [s.ckpt_module for s in rm.shards][:50]})
    header = {"target": plan.target.id, "resolved": plan.target.resolved, "architecture": plan.arch_name,
              "quant_method": plan.quant.method_key if plan.quant else None,
              "skip_list_key": plan.exclude_key, "speculative": plan.speculative,
              "draft_class": plan.draft.cls if plan.draft else None, "mtp_layers": list(plan.mtp_layers),
              "deployment": plan.deployment_text, "unsupported": plan.unsupported,
              "not_simulated": plan.not_simulated, "whole_draft_excluded": plan.whole_draft_excluded}
    if json_out:
        extra = {"dropped": [{"tensor": k, "why": v} for k, v in list(plan.dropped.items())[:1000]],
                 "draft_skip_list": plan.exclude_draft[:5000] if plan.draft else None}
        return json.dumps({**header, "modules": rows, **extra}, indent=2) + "\n"
    out = [f"{k}: {v}" for k, v in header.items() if v not in (None, [], False)]
    if plan.unsupported:
        return _text(out)
    out.append("")
    w = max((len(r["module"]) for r in rows), default=10)
    for r in rows:
        out.append(f"{r['role']:<5} {r['module']:<{w}}  {r['kind']:<9} {r['decision']:<17} stored {r['stored']}")
        out.append(f"{'':<5} {'':<{w}}  reason: {r['reason']}" + (f"; raises: {r['error']}" if r["error"] else ""))
    if plan.dropped:
        out.append("")
        out.append(f"{len(plan.dropped)} checkpoint tensor(s) not loaded by this target, e.g.:")
        for k, v in list(plan.dropped.items())[:5]:
            out.append(f"  {k}: {v}")
    return _text(out)


def _text(lines: list[str]) -> str:
    """Plan text with names from the checkpoint printable (control characters, lone surrogates escaped)."""
    from ckptlint.render.safe import clean, defuse_commands

    return defuse_commands("\n".join(clean(line) for line in lines)) + "\n"
