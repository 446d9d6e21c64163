"""The simulation's shortcut for expert modules (``simulate.names._expert_runs``: expert modules named once
per checkpoint and shared by targets with the same expert rule) builds exactly the plan the
module-by-module path builds: same runtime modules in the same order, same shards, same
decisions, same dropped tensors, on every shipped fixture and synthetic model, for every verified
target, with and without speculative decoding."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ckptlint import simulate as S
from ckptlint.simulate import names as N
from ckptlint.deployment import Deployment
from ckptlint.reader import load_checkpoint
from ckptlint.targets import list_targets
from ckptlint.testing import models as M
from helpers import build

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE_DIRS = sorted([p for p in ROOT.iterdir() if (p / "config.json").exists()]
                      + [p for p in (ROOT / "upstream").iterdir() if (p / "config.json").exists()])


def _per_module_runs(ckpt, arch, renames, draft_prefix, draft_word=None):
    """Every module in a run of its own with no runtime: the module-by-module path (each module's renamed
    name and draft-prefix membership, which the runs hand to it, computed here on their own)."""
    out = []
    for g in S.module_groups(ckpt, arch.layer_prefix):
        module = g[0]
        member = bool(draft_prefix) and ((module + ".").startswith(draft_prefix)
                                         or (bool(draft_word) and draft_word in module))
        out.append((None, g[4], member, [], [(g, renames(module))]))
    return out


def _describe(plan: S.Plan) -> list:
    out = [plan.simulated, plan.unsupported, plan.not_simulated, sorted(plan.dropped.items()), plan.fusion]
    for key, rm in plan.modules.items():
        d = rm.decision
        out.append((key, rm.name, rm.kind, rm.loader, rm.role, rm.fused_into,
                    None if d is None else (d.quantized, d.reason, d.entry, d.error, d.conflict),
                    [(s.ckpt_module, s.query, s.expert, s.proj, [t.name for t in s.tensors], s.stored.describe(),
                      s.stored.sig) for s in rm.shards]))
    return out


# Releases on both sides of the draft-naming and skip-list changes (docs/frameworks/sglang.md#releases,
# docs/frameworks/vllm.md#releases).
TARGETS = ("sglang==0.5.9", "sglang==0.5.15", "sglang==0.5.16", "sglang==0.5.23", "vllm==0.24.0", "vllm==0.33.0")


def _compare(monkeypatch, path: Path, speculative: bool | None) -> int:
    targets = [t for t in list_targets() if t.id in TARGETS]
    assert len(targets) == len(TARGETS)
    dep = Deployment(speculative=speculative)
    fast_ck = load_checkpoint(path)
    fast = [_describe(S.simulate(fast_ck, t, dep)) for t in targets]
    with monkeypatch.context() as m:
        m.setattr(N, "_expert_runs", _per_module_runs)
        slow_ck = load_checkpoint(path)
        slow = [_describe(S.simulate(slow_ck, t, dep)) for t in targets]
    for t, a, b in zip(targets, fast, slow):
        assert a == b, t.id
    return sum(1 for t in targets if t.id)


@pytest.mark.parametrize("path", FIXTURE_DIRS, ids=lambda p: p.name)
def test_fixtures_same_plan_as_module_by_module(monkeypatch, path):
    assert _compare(monkeypatch, path, None) > 0
    _compare(monkeypatch, path, False)


SPECS = {
    "glm5-quark": lambda: M.glm5_quark_mxfp4(),
    "deepseek-nvfp4-mtp-quantized": lambda: M.modelopt_nvfp4(M.deepseek_dims(), mtp_quantized=True),
    "gpt-oss": lambda: M.gpt_oss_spec(),
    "qwen3-next-mtp": lambda: M.qwen_mtp_spec(),
    "qwen3.5-mtp": lambda: M.qwen_mtp_spec("Qwen3_5MoeForCausalLM"),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_models_same_plan_as_module_by_module(tmp_path, monkeypatch, name):
    path = build(tmp_path, SPECS[name]())
    _compare(monkeypatch, path, None)
    _compare(monkeypatch, path, False)


def test_shortcut_is_taken_and_shared(tmp_path):
    """On a MoE checkpoint the expert runs carry almost every module, and two targets with the same
    expert rule compute them once."""
    path = build(tmp_path, M.glm5_quark_mxfp4())
    ck = load_checkpoint(path)
    targets = [t for t in list_targets() if t.id in ("sglang==0.5.23", "vllm==0.33.0")]
    for t in targets:
        S.simulate(ck, t, Deployment())
    runs = [v for k, v in ck.cache.items() if isinstance(k, tuple) and k[0] == "runs"]
    assert len(runs) == 1
    in_runs = sorted(s.ckpt_module for r in runs[0] if r[0] is not None for s in r[3])
    # every expert module, the MTP layer's too (which layer is the draft is decided per target)
    expected = sorted(g[0] for g in S.module_groups(ck, "model.layers.")
                      if re.search(r"\.mlp\.experts\.\d+\.(gate|up|down)_proj$", g[0]))
    assert in_runs == expected and len(expected) > 100


def test_module_layers_are_the_component_after_the_prefix():
    """Each module's layer index is the decimal component right after the layer prefix, whatever
    the module before it was (the grouping reuses the last layer's prefix as a shortcut)."""
    from ckptlint.checkpoint import Checkpoint, TensorInfo

    names = ["model.layers.3.mlp.down_proj.weight", "model.layers.3.mlp.up_proj.weight", "model.layers.5.weight",
             "\0model.layers.3.x.weight", "model.layers.3.y.weight", "model.layers.²2.z.weight",
             "model.layers.3.w.weight", "model.layersX.3.v.weight", "model.layers.12.u.weight", "lm_head.weight"]
    ck = Checkpoint(root="x", tensors={n: TensorInfo(n, "BF16", (2, 2), "a.safetensors") for n in names})

    def layer_of(module: str, prefix: str = "model.layers.") -> int | None:
        if not module.startswith(prefix):
            return None
        head = module[len(prefix):].split(".")[0]
        return int(head) if head.isdecimal() else None

    got = {g[0]: g[4] for g in S.module_groups(ck, "model.layers.")}
    assert got == {n.rpartition(".")[0]: layer_of(n.rpartition(".")[0]) for n in names}
    assert got["model.layers.5"] == 5 and got["\0model.layers.3.x"] is None and got["model.layers.²2.z"] is None
