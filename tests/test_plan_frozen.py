"""The simulation returns one frozen Plan: rules read it, and nothing can write into it afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptlint.deployment import Deployment
from ckptlint.engine import check
from ckptlint.reader import load_checkpoint
from ckptlint.simulate import simulate
from ckptlint.targets import resolve

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"


@pytest.fixture(scope="module")
def plan():
    (target,) = resolve("sglang==0.5.15")
    return simulate(load_checkpoint(str(FIXTURE)), target, Deployment())


def test_plan_fields_cannot_be_assigned(plan):
    with pytest.raises(AttributeError):
        plan.fusion = True
    with pytest.raises(AttributeError):
        plan.unsupported = "no"


def test_plan_containers_are_read_only(plan):
    with pytest.raises(TypeError):
        plan.modules["model.x"] = next(iter(plan.modules.values()))
    with pytest.raises(TypeError):
        plan.dropped["x.weight"] = "why"
    for name in ("mtp_layers", "exclude_main", "exclude_entries", "exclude_draft", "assumptions"):
        assert isinstance(getattr(plan, name), tuple), name
    assert plan.mtp_layers == (78,)


def test_runtime_modules_and_decisions_cannot_be_changed(plan):
    rm = plan.modules["model.eh_proj"]
    with pytest.raises(AttributeError):
        rm.decision = None
    with pytest.raises(AttributeError):
        rm.decision.quantized = False
    assert isinstance(rm.shards, tuple)
    with pytest.raises(TypeError):
        rm.firsts[("x",)] = rm.shards[0]
    with pytest.raises(AttributeError):
        rm.shards[0].stored.quantized = None


def test_the_plan_holds_what_the_rules_judge(plan):
    """The MTP exclude-prefix bug as the plan states it: SGLang 0.5.15 builds the draft's eh_proj
    MXFP4 while the checkpoint stores it BF16, and the mismatch (with the framework's error) is part
    of the plan, not computed by the rule."""
    rm = plan.modules["model.eh_proj"]
    assert rm.role == "draft" and rm.decision.quantized
    assert rm.mismatches and rm.mismatches[0].direction == "unquantized-into-quantized"
    assert rm.mismatches[0].consequence.value == "load-error"
    assert rm.placement is not None and rm.placement.tp == 1


def test_check_leaves_plans_as_simulated():
    """Running every rule changes nothing in the plans they read."""
    (target,) = resolve("sglang==0.5.15")
    report = check(str(FIXTURE), [target])
    again = simulate(load_checkpoint(str(FIXTURE)), target, Deployment())
    plan = report.plans[target.id]
    assert list(plan.modules) == list(again.modules)
    for key, rm in plan.modules.items():
        other = again.modules[key]
        assert (rm.decision, rm.fused_into, len(rm.mismatches), len(rm.layout_issues)) == \
            (other.decision, other.fused_into, len(other.mismatches), len(other.layout_issues))
