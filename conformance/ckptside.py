"""The ckptlint side: per runtime module, what ckptlint's simulation says a target builds.

``side(ckpt, "sglang==0.5.23")`` runs ``ckptlint.simulate.simulate`` with the default deployment and
returns the frozen plan's decisions as ``ModuleDecision`` records, plus the inputs ckptlint fed its
matchers (the skip lists after the framework's rewrites, the packed-modules mapping), so that an
adapter can call the framework's own functions with exactly those inputs.

Checkpoints: ``fixture_paths()`` (every shipped fixture), ``case_checkpoints(tmp)`` (every rule case
of tests/cases, built into ``tmp``), ``in_memory(config, tensors)`` (probe checkpoints, no files).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from ckptlint.checkpoint import Checkpoint, TensorInfo
from ckptlint.deployment import Deployment
from ckptlint.simulate import Plan, simulate
from ckptlint.targets import FRAMEWORKS, known_versions, resolve

REPO = Path(__file__).resolve().parent.parent


class ModuleDecision(NamedTuple):
    name: str  # runtime module name (the prefix the framework's quant config is asked about)
    kind: str  # ckptlint module kind: linear, moe, lm_head, embedding, plain, router, other
    role: str  # main | draft
    quantized: bool  # built quantized
    conflict: bool  # fused shards disagree: the framework raises at construction
    forced: bool  # a draft forced unquantized / whole draft excluded (not a skip-list decision)
    scheme: str | None
    reason: str
    shards: tuple[str, ...]  # the checkpoint-side shard names (the packed mapping's members)


class Side(NamedTuple):
    target: str
    plan: Plan
    quant: dict[str, Any] | None  # the quantization config the framework's from_config receives
    method_key: str | None
    exclude_key: str | None
    exclude_main: tuple[str, ...]
    exclude_draft: tuple[str, ...]
    exclude_entries: tuple[str, ...]  # as the config writes them
    packed: dict[str, list[str]]
    modules: dict[str, ModuleDecision]
    # the mapping the framework's loader hands the quant config (the model class's runtime
    # packed_modules_mapping plus the method's additions), whether or not the method's own matcher
    # uses it (ckptlint's ``packed`` is {} for a method that never consults it)
    loader_packed: dict[str, list[str]] = {}
    ckpt: Checkpoint | None = None  # the checkpoint itself (config.json keys and tensor dtypes a release reads)


def targets(framework: str | None = None) -> list[str]:
    """Every verified target (``ckptlint targets``), e.g. ``sglang==0.5.23``."""
    return [f"{fw}=={v}" for fw in FRAMEWORKS if framework in (None, fw) for v in known_versions(fw)]


def framework_quant_config(ckpt: Checkpoint) -> dict[str, Any] | None:
    """What the framework hands to its quant config's ``from_config``: config.json's
    ``quantization_config``, else ``hf_quant_config.json`` as a whole (ModelOpt exports)."""
    cfg = ckpt.config if isinstance(ckpt.config, dict) else {}
    qc = cfg.get("quantization_config")
    if isinstance(qc, dict):
        return qc
    return ckpt.hf_quant_config if isinstance(ckpt.hf_quant_config, dict) else None


def side(ckpt: Checkpoint, target: str, deployment: Deployment | None = None) -> Side | None:
    """ckptlint's decisions for ``ckpt`` on ``target``; None when the target does not simulate it
    (unsupported architecture or method, no quantization config)."""
    from ckptlint import userregex

    userregex.reset()
    t = resolve(target)[0]
    plan = simulate(ckpt, t, deployment or Deployment())
    if not plan.simulated or plan.quant is None or plan.method is None:
        return None
    mods: dict[str, ModuleDecision] = {}
    for key, rm in plan.modules.items():
        d = rm.decision
        if d is None or rm.role not in ("main", "draft"):
            continue
        mods[key] = ModuleDecision(
            plan.renames.quant_name(rm.name, rm.role), rm.kind, rm.role, bool(d.quantized), bool(d.conflict),
            bool(d.forced_draft) or d.reason.startswith("whole draft"),
            d.scheme.name if d.scheme is not None else None, d.reason,
            tuple(s.ckpt_module for s in rm.shards))
    return Side(target, plan, framework_quant_config(ckpt), plan.quant.method_key, plan.exclude_key,
                tuple(plan.exclude_main), tuple(plan.exclude_draft), tuple(plan.exclude_entries),
                {k: list(v) for k, v in dict(plan.packed).items()}, mods,
                {k: list(v) for k, v in {**dict(plan.class_packed),
                                          **dict(plan.method.packed_extra)}.items()}, ckpt)


def load(path: str | Path) -> Checkpoint:
    from ckptlint.reader.loader import load_checkpoint

    return load_checkpoint(str(path))


def in_memory(config: dict[str, Any], tensors: list[tuple[str, str, tuple[int, ...]]],
              hf_quant_config: dict[str, Any] | None = None, root: str = "<probe>") -> Checkpoint:
    """A checkpoint that exists only in memory (probe matrix): config.json and the tensor listing."""
    ck = Checkpoint(root=root, config=config, hf_quant_config=hf_quant_config)
    ck.tensors = {n: TensorInfo(n, dt, tuple(shape), "model.safetensors") for n, dt, shape in tensors}
    return ck


def fixture_paths() -> list[Path]:
    """Every shipped fixture checkpoint (a folder holding config.json under fixtures/)."""
    return sorted(p.parent for p in (REPO / "fixtures").rglob("config.json"))


def case_checkpoints(tmp: Path) -> Iterator[tuple[str, Path]]:
    """Every rule case of tests/cases that describes a checkpoint, built under ``tmp``:
    (``CODE/name``, path)."""
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import casefiles  # noqa: E402 - the test suite's case reader

    for case in casefiles.discover():
        if case.data.get("checkpoint") is None:
            continue
        dest = tmp / case.code / case.name
        try:
            path = casefiles.build_case(case, dest)
        except Exception:  # noqa: BLE001 - a case the builder cannot write is the test suite's concern
            continue
        yield f"{case.code}/{case.name}", path
