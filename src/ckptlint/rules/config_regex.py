from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.matching import glob_regex
from ckptlint.rules.base import Rule, RuleContext
from ckptlint.userregex import PATTERN_BUDGET_S


class ConfigRegexUndecided(Rule):
    """
    ## What it does
    Reports a regular expression from the quantization config -- a skip-list `re:` entry, a
    compressed-tensors `re:` target, a GPTQ `dynamic` key, a ModelOpt glob -- that Python's `re`
    could not match against the checkpoint's module names within ckptlint's time budget (1 s per
    pattern, 3 s for all of them; the first 0.1 ms of each match is free). ckptlint runs these
    patterns with the engine the frameworks use; a pattern whose worst case it cannot bound from its
    structure runs under a timer. Where no timer is available (a thread other than the main one,
    or a platform without `SIGALRM` such as Windows) such a pattern is not run at all, and the
    finding says "no verdict" (`hygiene`) instead.

    ## Why is this bad?
    Nested repeats such as `([a-z_.0-9]+)*` make a backtracking engine try exponentially many
    ways to split a name before it gives up. The frameworks call `re.match` with the same pattern
    on the same module names while they build the model, so the server stalls at start-up for
    minutes or hours. And ckptlint cannot say which modules the entry excludes: it counts it as
    matching none of the names it could not decide, so its predictions for those modules are
    unreliable.

    ## Example
    `"ignore": ["lm_head", "re:([a-z_.0-9]+)*X"]` in a compressed-tensors config: matching
    `model.layers.0.self_attn.q_proj` never finishes.

    ## How to fix
    Write the pattern without a repeat inside a repeat: `re:.*X` matches the same names here, in
    linear time. Or list the module names exactly.
    """

    code = "CF312"
    name = "config-regex-undecided"
    summary = "A regular expression in the quantization config cannot be matched against module names in time"
    consequences = (Consequence.LOAD_ERROR, Consequence.HYGIENE)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or plan.quant is None or ctx.target is None:
            return
        undecided = plan.undecided_regexes  # what the simulation left undecided (the check's regex scope)
        if not undecided:
            return
        seen: set[tuple[str, bool]] = set()
        for pattern, full, where in _patterns(plan):
            rx = undecided.get((pattern, full))
            if rx is None or (pattern, full) in seen:
                continue
            seen.add((pattern, full))
            first = rx.undecided_names[0]
            no_timer = rx.reason is not None and rx.reason.startswith("no timer")
            if no_timer:
                message = (f"{where} `{pattern}`: ckptlint cannot bound this pattern's matching time from its "
                           f"structure and has {rx.reason}, so it did not decide whether it matches `{first}`")
            else:
                message = (f"{where} `{pattern}`: Python's re did not decide whether it matches `{first}` "
                           f"({rx.reason}); " + mention(ctx.target.resolved)
                           + " runs re.match with this pattern on the same "
                           "module names while it builds the model, so expect start-up to stall")
            message += (f". ckptlint counted it as matching none of the {rx.undecided_count} module name(s) it "
                        "could not decide: its predictions for those modules are unreliable")
            yield self.finding(
                ctx, Consequence.HYGIENE if no_timer else Consequence.LOAD_ERROR, message,
                file=plan.quant.source_file,
                hint="write the pattern without a repeat inside a repeat (e.g. `.*X` for `([a-z_.0-9]+)*X`), "
                     "or list the module names exactly",
                data={"pattern": pattern, "undecided": list(rx.undecided_names),
                      "undecided_count": rx.undecided_count, "reason": rx.reason,
                      "budget_s": PATTERN_BUDGET_S})


def _patterns(plan) -> Iterator[tuple[str, bool, str]]:
    """(pattern, fullmatch?, where) of every config-supplied regex the plan's simulation matched."""
    method, quant = plan.method, plan.quant
    key = plan.exclude_key or "skip list"
    if method is not None:
        for entry in dict.fromkeys([*plan.exclude_main, *plan.exclude_draft]):
            if method.match == "glob_component":
                yield glob_regex(entry), True, f"`{key}` glob (as a regex)"
            elif entry.startswith("re:") and method.match in ("exact_or_regex", "suffix", "regex_or_substring_ci"):
                yield entry[3:], False, f"`{key}` entry"
            elif method.match == "gptq_dynamic":
                yield entry[2:] if entry[:2] in ("-:", "+:") else entry, False, "`dynamic` rule"
    for targets, _ in getattr(quant, "groups", ()):
        for t in targets:
            if isinstance(t, str) and t.startswith("re:"):
                yield t[3:], False, "config_groups target"
    for rx, _ in getattr(quant, "positive", ()):
        yield rx.pattern, False, "`dynamic` rule"
