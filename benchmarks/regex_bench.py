#!/usr/bin/env python3
"""What bounding config-supplied regexes (ckptlint.userregex) costs on the hot path.

    .venv/bin/python benchmarks/regex_bench.py [--reps 5] [--scale full|tiny]

Generates the Kimi-K2-like Quark MXFP4 benchmark checkpoint (benchmarks/layouts.py; 139,095 tensors
at full scale, Quark ``exclude`` matched ``exact_or_regex``, reusing bench.py's cache), reads it once,
then times ``simulate`` (the per-module pass where every skip-list entry is tried on every module name)
for the newest SGLang release under three skip lists, alternating the matcher of ``re:`` entries between
the previous one (a plain ``re.compile(...).match`` in a lambda) and ckptlint.userregex:

* ``exact``: the checkpoint's own list (exact names only): no regex is involved (control);
* ``+3 linear``: the same list plus three typical ``re:`` entries that match no module, so every
  module name is tried against all three (the worst case for their cost);
* ``+1 guarded``: the list plus one entry the static bound cannot clear (``.*\\.layers\\.\\d+\\.mlp\\.zz``),
  which runs under the SIGALRM deadline.

Then times one ``first_match`` per runtime module name of the plan through a list holding only the
regex entries (per entry and name). Prints medians and the ratio new/old, measured in this one run.
A check tries the skip list on runtime modules (a fused or FusedMoE module is one name), not on
tensors: about 1,300 names per target here.
"""

from __future__ import annotations

import argparse
import copy
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

LINEAR = [r"re:.*\.mlp\.gate\.zz$", r"re:model\.layers\.\d+\.self_attn\.zz", r"re:.*lm_head_zz"]
GUARDED = [r"re:.*\.layers\.\d+\.mlp\.zz"]


def _old_regex_pred(entry: str, scope=None):
    try:
        rx = re.compile(entry[3:])
    except re.error:
        return None
    return lambda name: rx.match(name) is not None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scale", choices=("tiny", "full"), default="full")
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    args = ap.parse_args()

    from bench import ensure_checkpoint
    from layouts import LAYOUTS

    from ckptlint import matching
    from ckptlint.deployment import Deployment
    from ckptlint.reader import load_checkpoint
    from ckptlint.simulate import simulate
    from ckptlint.targets import newest_targets

    args.workdir.mkdir(parents=True, exist_ok=True)
    path, _ = ensure_checkpoint(LAYOUTS["kimi"](args.scale), args.scale, args.workdir, print)
    ckpt = load_checkpoint(str(path))
    (target,) = [t for t in newest_targets() if t.id.startswith("sglang")]
    base = list(ckpt.config["quantization_config"]["exclude"])
    lists = {"exact": base, "+3 linear": base + LINEAR, "+1 guarded": base + GUARDED}
    new_pred = matching._regex_pred
    results: dict[tuple[str, str], list[float]] = {}
    for rep in range(args.reps + 1):  # the first round warms up
        for name, entries in lists.items():
            variant = copy.copy(ckpt)
            variant.config = copy.deepcopy(ckpt.config)
            variant.config["quantization_config"]["exclude"] = entries
            order = (("old", _old_regex_pred), ("new", new_pred))
            for label, pred in (order if rep % 2 else order[::-1]):  # alternate which goes first
                matching._regex_pred = pred
                t0 = time.perf_counter()
                plan = simulate(variant, target, Deployment())
                dt = time.perf_counter() - t0
                if rep:
                    results.setdefault((name, label), []).append(dt)
                assert plan.modules
    matching._regex_pred = new_pred
    # Per call: every runtime module name of the plan through a list of only the regex entries.
    names = list(plan.modules)
    per_call: dict[tuple[str, str], list[float]] = {}
    for rep in range(args.reps + 1):
        for name, entries in (("3 linear", LINEAR), ("1 guarded", GUARDED)):
            order = (("old", _old_regex_pred), ("new", new_pred))
            for label, pred in (order if rep % 2 else order[::-1]):
                matching._regex_pred = pred
                lst = matching.compile_list("exact_or_regex", entries)
                t0 = time.perf_counter()
                for _ in range(20):
                    for n in names:
                        lst.first_match(n)
                dt = (time.perf_counter() - t0) / (20 * len(names) * len(entries))
                if rep:
                    per_call.setdefault((name, label), []).append(dt)
    matching._regex_pred = new_pred
    print(f"simulate() on {path.name} ({len(ckpt.config['quantization_config']['exclude'])} exact entries), "
          f"{target.id}, median of {args.reps}:")
    print(f"{'skip list':<12} {'old':>9} {'new':>9} {'new/old':>8}")
    for name in lists:
        old = statistics.median(results[(name, "old")])
        new = statistics.median(results[(name, "new")])
        print(f"{name:<12} {old:8.3f}s {new:8.3f}s {new / old:8.3f}")
    print(f"one entry on one name ({len(names)} runtime module names), median of {args.reps}:")
    for name in ("3 linear", "1 guarded"):
        old = statistics.median(per_call[(name, "old")])
        new = statistics.median(per_call[(name, "new")])
        print(f"{name:<12} {old * 1e9:7.0f}ns {new * 1e9:7.0f}ns {new / old:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
