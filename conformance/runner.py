"""Running the suite: every source (fixtures, rule cases, probes) x every target x every module,
at both levels, plus the source-level checks (packed mappings, load_weights fingerprints).

The framework adapter of ``framework`` is ``conformance.<framework>.Release(version, download=...)``
with ``leaf_verdicts(side)``, ``config_verdicts(side)``, an ``ex`` (Extractor) whose fingerprints
are recorded, and optionally ``source_checks(target) -> list[Disagreement]`` and
``load_weights_fingerprints(classes)``.
"""

from __future__ import annotations

import importlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from conformance import ckptside, core
from conformance.core import Disagreement, Verdict


@dataclass
class Source:
    id: str
    ckpt: Any


def sources(tmp: Path, *, fixtures: bool = True, cases: bool = True, probes: bool = True) -> list[Source]:
    out: list[Source] = []
    if fixtures:
        out += [Source(str(p.relative_to(ckptside.REPO)), ckptside.load(p)) for p in ckptside.fixture_paths()]
    if cases:
        out += [Source(f"tests/cases/{cid}", ckptside.load(p)) for cid, p in ckptside.case_checkpoints(tmp)]
    if probes:
        from conformance import probes as pr

        out += [Source(p.id, p.ckpt) for p in pr.probes()]
    return out


_AT = re.compile(r" at [\w.]+\.py:\d+")


@dataclass
class TargetResult:
    target: str
    disagreements: list[Disagreement] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)
    verdicts: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (source, level, module) -> says
    checked: int = 0


def adapter(framework: str):
    return importlib.import_module(f"conformance.{framework}")


def check_target(target: str, srcs: Iterable[Source], *, release: Any = None, data_target: str | None = None,
                 download: bool = True) -> TargetResult:
    """Run ``srcs`` through ``release`` (default: the target's own wheel). ``data_target``: the
    ckptlint target whose data predicts (default ``target``; ``new`` runs the previous release's
    data against the new wheel)."""
    fw, _, version = target.partition("==")
    rel = release or adapter(fw).Release(version, download=download)
    data_target = data_target or target
    res = TargetResult(target)
    if hasattr(rel, "extra_probes"):  # an adapter's own probe matrix (conformance/vllm.py)
        srcs = list(srcs) + [Source(pid, ck) for pid, ck in rel.extra_probes()]
    for src in srcs:
        side = ckptside.side(src.ckpt, data_target)
        if side is None or unbounded_regex(side):
            continue
        for level, fn in (("leaf", rel.leaf_verdicts), ("config", rel.config_verdicts)):
            vs: dict[str, Verdict] = fn(side)
            res.checked += len(vs)
            for name, v in vs.items():
                res.verdicts[(src.id, level, name)] = _AT.sub("", v.says)  # line numbers move between releases
            found = core.compare(side, vs, level=level, source=src.id)
            res.disagreements += [d._replace(version=version) for d in found]
    if hasattr(rel, "source_checks"):
        res.disagreements += rel.source_checks(data_target)
    res.fingerprints = dict(rel.ex.fingerprints)
    return res


def unbounded_regex(side: ckptside.Side) -> str | None:
    """A regular expression of the quant config that may not finish (nested quantifiers: ckptlint
    reports it undecided, CF312). The framework's own code would match it with ``re`` unbounded, so
    the source is not run through it."""
    from ckptlint.userregex import is_linear

    q = side.quant or {}
    texts = list(side.exclude_main) + list(side.exclude_draft) + list(side.exclude_entries)
    dyn = q.get("dynamic")
    texts += list(dyn) if isinstance(dyn, dict) else []
    groups = q.get("config_groups")
    if isinstance(groups, dict):
        for g in groups.values():
            if isinstance(g, dict) and isinstance(g.get("targets"), list):
                texts += g["targets"]
    for t in texts:
        if not isinstance(t, str):
            continue
        pat = t[3:] if t.startswith("re:") else t[2:] if t[:2] in ("+:", "-:") else None
        if pat is not None and not is_linear(pat):
            return t
    return None


def tracked_arch_classes(target: str) -> list[str]:
    from ckptlint.targets import resolve

    t = resolve(target)[0]
    data = t.data
    archs = data["architectures"] if isinstance(data, dict) else data.architectures
    return sorted(a for a in archs if a != "*")


def run(targets: list[str], *, download: bool = True, cases: bool = True, probes: bool = True,
        progress=None, on_result=None) -> tuple[list[TargetResult], list[Disagreement], list[core.AllowEntry]]:
    """Every target; returns (results, disagreements not allowed, stale allow entries).

    ``on_result(result, bad, allowed, stale)`` is called after each target (its disagreements not
    allowed, how many the allow-list covered, the allow entries for its release that matched
    nothing in its run), so a long run records each target as it finishes. Allow entries are
    judged per target: an entry whose ``versions`` cover a release must match one of that
    release's disagreements (only on full runs: ``--quick`` skips cases and probes)."""
    import fnmatch

    allow = core.Allow()
    results, bad_all, stale_all = [], [], []
    with tempfile.TemporaryDirectory(prefix="ckptlint-conformance-") as tmp:
        srcs = sources(Path(tmp), cases=cases, probes=probes)
        for t in targets:
            if progress:
                progress(f"{t}: {len(srcs)} checkpoints")
            r = check_target(t, srcs, download=download)
            results.append(r)
            for e in allow.entries:
                e.used = 0
            bad, ok = allow.split(r.disagreements)
            fw, _, v = t.partition("==")
            stale = [e for e in allow.entries if e.used == 0 and e.framework == fw
                     and any(fnmatch.fnmatchcase(v, p) for p in e.versions)] if (cases and probes) else []
            bad_all += bad
            stale_all += [e for e in stale if e not in stale_all]
            if on_result:
                on_result(r, bad, len(ok), stale)
    return results, bad_all, stale_all
