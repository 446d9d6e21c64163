#!/usr/bin/env python3
"""Conformance suite: ckptlint's per-module decisions against each release's own code (docs/conformance.md).

  scripts/conformance.py run [--target sglang==0.5.23]... [--no-download] [--quick]
  scripts/conformance.py new sglang 0.5.24 [--previous 0.5.23]
  scripts/conformance.py new vllm 0.32.0 0.33.0
  scripts/conformance.py lock-status
  scripts/conformance.py extract vllm 0.33.0 | --all   (regenerate src/ckptlint/targets/extracted/)

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


def _stale_text(e) -> str:
    return f"{e.framework} {','.join(e.versions)} {e.level} {e.method} {e.source} {e.module} {e.says}"


def cmd_run(args: argparse.Namespace) -> int:
    """Runs the targets; after each one (unless --quick) its lock entry records this run, agreeing
    or not, and docs/conformance.md's lock-status section is regenerated."""
    import time

    targets = _targets(args.target)

    def record(r, bad, allowed, stale):
        print(f"{r.target}: {r.checked} module decisions checked, {len(r.disagreements)} disagreements "
              f"({len(bad)} not allowed), {len(stale)} stale allow entries, "
              f"{len(r.fingerprints)} upstream functions fingerprinted, {time.monotonic() - t0:.0f} s", flush=True)
        for d in bad:
            print("DISAGREE", d.line(), flush=True)
        for e in stale:
            print(f"STALE allow entry ({_stale_text(e)}): {e.reason}", flush=True)
        if not args.quick:
            lock.write({r.target: lock.entry(r.target, fingerprints=r.fingerprints, checked=r.checked,
                                             disagreements=bad, allowed=allowed,
                                             stale=[_stale_text(e) for e in stale])})
            lock.write_docs(ckptside.targets())

    t0 = time.monotonic()
    results, bad, stale = runner.run(targets, download=not args.no_download, cases=not args.quick,
                                     probes=not args.quick, progress=lambda m: print(m, file=sys.stderr),
                                     on_result=record)
    if args.quick:
        print("quick run (fixtures only): lock not written", file=sys.stderr)
    else:
        print(f"lock written for {len(results)} target(s): {lock.LOCK_FILE.relative_to(REPO)} "
              f"(docs/conformance.md lock-status section regenerated)", file=sys.stderr)
    print(f"{len(bad)} disagreements, {len(stale)} stale allow entries, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 1 if (bad or stale) else 0


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
    """Per target: the result of its last conformance run (agree / N disagreements), "data changed"
    when its target data changed since, "not locked" when never run. Exit 1 unless every target agrees
    on current data. ``--write-docs`` regenerates docs/conformance.md's section from the lock."""
    targets = ckptside.targets()
    st = lock.status(targets)
    for t, s in st.items():
        hint = f"  (re-run: {lock.rerun_command(t)})" if s in ("data changed", "not locked") else ""
        print(f"{t:20} {s}{hint}")
    if args.write_docs:
        changed = lock.write_docs(targets)
        print(f"docs/conformance.md: {'updated' if changed else 'already current'}", file=sys.stderr)
    return 0 if all(s == "agree" for s in st.values()) else 1


def cmd_extract(args: argparse.Namespace) -> int:
    """Regenerates the extracted release knowledge (src/ckptlint/targets/extracted/<fw>/<ver>/*.json)
    from the release's wheel, for one release or (``--all``) every supported release."""
    from conformance import knowledge

    if args.all:
        releases = [tuple(t.split("==")) for t in ckptside.targets()]
        releases += [(fw, v) for fw, v in knowledge.extracted_extra() if (fw, v) not in releases]
    elif args.framework and args.version:
        releases = [(args.framework, args.version)]
    else:
        print("extract: give FRAMEWORK VERSION or --all", file=sys.stderr)
        return 2
    for fw, v in releases:
        for path in knowledge.run(fw, v, args.only, download=not args.no_download):
            print(f"{fw}=={v}: wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the suite; records each target's run in the lock")
    r.add_argument("--target", action="append", help="a target or range (default: every verified release)")
    r.add_argument("--no-download", action="store_true", help="use cached wheels only")
    r.add_argument("--quick", action="store_true", help="fixtures only (no rule cases, no probes); never writes the lock")
    n = sub.add_parser("new", help="what changes in a new framework release")
    n.add_argument("framework", choices=["sglang", "vllm"])
    n.add_argument("version")
    n.add_argument("newer", nargs="?", help="with two versions: the first is the previous release")
    n.add_argument("--previous", help="the supported release to compare with (default: the newest older one)")
    n.add_argument("--limit", type=int, default=60)
    ls = sub.add_parser("lock-status", help="each target's last run from the lock: agree / N disagreements / "
                                            "data changed / not locked (offline)")
    ls.add_argument("--write-docs", action="store_true", help="regenerate docs/conformance.md's section")
    x = sub.add_parser("extract", help="regenerate the release knowledge extracted from the wheels "
                                       "(src/ckptlint/targets/extracted/)")
    x.add_argument("framework", nargs="?", choices=["sglang", "vllm"])
    x.add_argument("version", nargs="?")
    x.add_argument("--all", action="store_true", help="every supported release (and every release already extracted)")
    x.add_argument("--only", action="append", help="only this extractor (default: all of conformance/knowledge)")
    x.add_argument("--no-download", action="store_true", help="use cached wheels only")
    args = ap.parse_args(argv)
    return {"run": cmd_run, "new": cmd_new, "lock-status": cmd_lock_status,
            "extract": cmd_extract}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
