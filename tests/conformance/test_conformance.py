"""Conformance: every fixture, rule case and probe x every verified release x every module, at both
levels (the framework's skip-list matchers, and its quant config's from_config + get_quant_method),
must agree with ckptlint's decisions, up to the reviewed allow-list (conformance/allow.toml)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.conformance


def _targets():
    from conformance import ckptside

    return ckptside.targets()


@pytest.fixture(scope="session")
def sources(tmp_path_factory):
    from conformance import runner

    return runner.sources(tmp_path_factory.mktemp("cases"))


@pytest.mark.parametrize("target", _targets())
def test_release_agrees(target, sources):
    from conformance import core, runner

    fw = target.partition("==")[0]
    try:
        runner.adapter(fw)
    except ImportError:
        pytest.skip(f"no conformance adapter for {fw} yet")
    res = runner.check_target(target, sources)
    bad, _ = core.Allow().split(res.disagreements)
    assert res.checked > 0
    assert not bad, "\n".join(d.line() for d in bad)


def test_known_disagreement_is_detected():
    """The harness can fail: SGLang 0.5.23's compressed-tensors matcher and ckptlint agree on the
    probe whose ignore list holds the dotted suffix `self_attn.o_proj`; the same framework verdicts
    compared with a forged ckptlint side (every module's quantized decision flipped) must be reported
    as disagreements."""
    from conformance import ckptside, core
    from conformance.probes import probes
    from conformance.sglang import Release

    rel = Release("0.5.23")
    probe = next(p for p in probes(("compressed-tensors",)) if p.id == "probe:llama/compressed-tensors/dotted_suffix")
    side = ckptside.side(probe.ckpt, "sglang==0.5.23")
    assert not core.compare(side, rel.leaf_verdicts(side), level="leaf", source=probe.id)
    forged = side._replace(modules={k: m._replace(quantized=not m.quantized) for k, m in side.modules.items()})
    assert core.compare(forged, rel.leaf_verdicts(side), level="leaf", source=probe.id)
