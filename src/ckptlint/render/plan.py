"""``ckptlint plan``: the per-module decision table, the view a user reaches for when a finding surprises."""

from __future__ import annotations

import json

from ckptlint.findings import natural_key
from ckptlint.render.safe import clean, defuse_commands
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
              "not_simulated": plan.not_simulated, "whole_draft_excluded": plan.whole_draft_excluded,
              "model_data": _model_data(plan)}
    if json_out:
        extra = {"dropped": [{"tensor": k, "why": v} for k, v in list(plan.dropped.items())[:1000]],
                 "draft_skip_list": plan.exclude_draft[:5000] if plan.draft else None,
                 "skip_entries": [e._asdict() for e in plan.skip_entries[:5000]]}
        return json.dumps({**header, "modules": rows, **extra}, indent=2) + "\n"
    out = [f"{k}: {v}" for k, v in header.items() if v not in (None, [], False)]
    if plan.unsupported:
        return _text(out)
    out += _skip_entries(plan)
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


def _model_data(plan: Plan) -> str | None:
    """Where the architecture's loading rules came from: hand data, the release's extracted class facts
    (TG605), or the generic rules (TG604)."""
    if plan.extracted:
        return (f"extracted from {plan.extracted} ({', '.join(plan.extracted_facts) or 'no loading facts'})"
                + (f", hand data: {', '.join(plan.hand_facts)}" if plan.hand_facts else "") + ", generic for the rest")
    if plan.generic:
        return "generic rules"
    return "hand data" if plan.arch is not None else None


_LIST_NAMES = {"main": "skip list", "draft": "draft skip list", "include": "quantized-module list"}


def _skip_entries(plan: Plan, limit: int = 40) -> list[str]:
    """Where each entry of the lists the target tests modules against comes from: the config as
    written, a framework rewrite (name mapper, `model.` variant, a draft's copy), or inference from
    the checkpoint's tensors."""
    out: list[str] = []
    for applies_to, title in _LIST_NAMES.items():
        entries = [e for e in plan.skip_entries if e.applies_to == applies_to]
        if not entries:
            continue
        counts: dict[str, int] = {}
        for e in entries:
            counts[e.origin] = counts.get(e.origin, 0) + 1
        out.append(f"{title}: {len(entries)} entries (" + ", ".join(f"{n} {o}" for o, n in counts.items()) + ")")
        sources = {}
        for e in entries:
            sources.setdefault((e.origin, e.source), []).append(e)
        for (origin, source), group in sources.items():
            out.append(f"  {origin}: {source}")
            shown = 5 if origin == "config" else limit  # the config's own entries: `--format json` lists them
            for e in group[:shown]:
                out.append(f"    {e.text}" + (f"  <- `{e.original}`" if e.original and e.original != e.text else ""))
            if len(group) > shown:
                out.append(f"    ... and {len(group) - shown} more")
    return out


def _text(lines: list[str]) -> str:
    """Plan text with names from the checkpoint printable (control characters, lone surrogates escaped)."""
    return defuse_commands("\n".join(clean(line) for line in lines)) + "\n"
