#!/usr/bin/env python3
"""Conformance suite: ckptlint's per-module decisions against each release's own code (docs/conformance.md).

  scripts/conformance.py run [--target sglang==0.5.23]... [--no-download] [--quick]
  scripts/conformance.py new sglang 0.5.24 [--previous 0.5.23]
  scripts/conformance.py new vllm 0.32.0 0.33.0
  scripts/conformance.py lock-status

Wheels are cached in $CKPTLINT_CONFORMANCE_CACHE (default ~/.cache/ckptlint/conformance).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "src")]

from conformance import ckptside, lock, runner  # noqa: E402


def _targets(specs: list[str] | None) -> list[str]:
    from ckptlint.targets import resolve

    if not specs:
        return ckptside.targets()
    out = []
    for s in specs:
        out += [t.resolved for t in resolve(s)]
    return out


def cmd_run(args: argparse.Namespace) -> int:
    targets = _targets(args.target)
    results, bad, stale = runner.run(targets, download=not args.no_download, cases=not args.quick,
                                     probes=not args.quick, progress=lambda m: print(m, file=sys.stderr))
    for r in results:
        print(f"{r.target}: {r.checked} module decisions checked, {len(r.disagreements)} disagreements "
              f"({len([d for d in bad if f'{d.framework}=={d.version}' == r.target])} not allowed), "
              f"{len(r.fingerprints)} upstream functions fingerprinted")
    for d in bad:
        print("DISAGREE", d.line())
    for e in stale:
        print(f"STALE allow entry ({e.framework} {e.versions} {e.level} {e.method} {e.source} {e.module}): {e.reason}")
    if bad or stale:
        print(f"{len(bad)} disagreements, {len(stale)} stale allow entries: lock not written", file=sys.stderr)
        return 1
    if args.quick:
        print("quick run (fixtures only): lock not written", file=sys.stderr)
        return 0
    lock.write({r.target: {"data": lock.data_digest(r.target), "wheel_sources": lock.sources_digest(r.fingerprints),
                           "functions": len(r.fingerprints), "decisions": r.checked} for r in results})
    print(f"lock written: {lock.LOCK_FILE.relative_to(REPO)}")
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    from ckptlint.targets import known_versions, parse_version

    fw, new = args.framework, args.version
    prev = args.previous
    if args.newer:  # `new vllm 0.32.0 0.33.0`: the previous release, then the new one
        prev, new = new, args.newer
    if prev is None:
        older = [v for v in known_versions(fw) if parse_version(v) < parse_version(new)]
        if not older:
            print(f"no supported {fw} release older than {new}", file=sys.stderr)
            return 2
        prev = older[-1]
    mod = runner.adapter(fw)
    rel_old, rel_new = mod.Release(prev), mod.Release(new)
    data_target = f"{fw}=={prev}"
    with tempfile.TemporaryDirectory(prefix="ckptlint-conformance-") as tmp:
        srcs = runner.sources(Path(tmp))
        a = runner.check_target(data_target, srcs, release=rel_old)
        b = runner.check_target(f"{fw}=={new}", srcs, release=rel_new, data_target=data_target)
    fa, fb = a.fingerprints, b.fingerprints
    changed = sorted(k for k in fa.keys() & fb.keys() if fa[k] != fb[k])
    added, removed = sorted(fb.keys() - fa.keys()), sorted(fa.keys() - fb.keys())
    print(f"== {fw} {prev} -> {new}: tracked upstream functions ({len(fa)} / {len(fb)})")
    for k in changed:
        print(f"  changed  {k}")
    for k in added:
        print(f"  new      {k}")
    for k in removed:
        print(f"  gone     {k}")
    if not (changed or added or removed):
        print("  no tracked function changed source")
    diffs = sorted((key, a.verdicts.get(key), b.verdicts.get(key)) for key in a.verdicts.keys() | b.verdicts.keys()
                   if a.verdicts.get(key) != b.verdicts.get(key))
    print(f"== decisions that change when {data_target}'s data is run against the {new} wheel: {len(diffs)}")
    for (src, level, module), x, y in diffs[: args.limit]:
        print(f"  [{level}] {src} :: {module}: {prev} {x} -> {new} {y}")
    if len(diffs) > args.limit:
        print(f"  ... {len(diffs) - args.limit} more (--limit)")
    new_dis = [d for d in b.disagreements if d.level == "source"]
    for d in new_dis:
        print("  source:", d.line())
    return 0


def cmd_lock_status(args: argparse.Namespace) -> int:
    st = lock.status(ckptside.targets())
    for t, s in st.items():
        print(f"{t:20} {s}")
    return 0 if all(s == "ok" for s in st.values()) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the suite; writes the lock when everything agrees")
    r.add_argument("--target", action="append", help="a target or range (default: every verified release)")
    r.add_argument("--no-download", action="store_true", help="use cached wheels only")
    r.add_argument("--quick", action="store_true", help="fixtures only (no rule cases, no probes); never locks")
    n = sub.add_parser("new", help="what changes in a new framework release")
    n.add_argument("framework", choices=["sglang", "vllm"])
    n.add_argument("version")
    n.add_argument("newer", nargs="?", help="with two versions: the first is the previous release")
    n.add_argument("--previous", help="the supported release to compare with (default: the newest older one)")
    n.add_argument("--limit", type=int, default=60)
    sub.add_parser("lock-status", help="which targets' data changed since the lock was written (offline)")
    args = ap.parse_args(argv)
    return {"run": cmd_run, "new": cmd_new, "lock-status": cmd_lock_status}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
