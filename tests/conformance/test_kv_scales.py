"""Conformance: the KV-cache scale names each target's data says a loader looks up agree with the
release's own remap function run in the data's order (conformance/kvscales.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.conformance


def _targets():
    from ckptlint.targets import list_targets

    return [t.id for t in list_targets() if t.data.loading.kv is not None]


@pytest.mark.parametrize("target", _targets())
def test_kv_scale_names_agree(target):
    from ckptlint.targets import resolve
    from conformance import kvscales

    t = resolve(target)[0]
    remap = kvscales.remap_function(t.framework, t.version)
    checked = [a for a in t.data.architectures if (ks := t.architecture(a).kv_scales) is not None
               and ks.simulated and ks.order in kvscales.ORDERS]
    bad = list(kvscales.disagreements(t, remap))
    assert not bad, "\n".join(d.line() for d in bad)
    if t.framework == "sglang" or t.version in ("0.11.0", "0.24.0"):
        assert checked, f"{target}: no architecture's KV-scale names were checked"


def test_forged_data_is_detected():
    """The check can fail: the SGLang 0.5.5 Mixtral loader data with its stacked-rename-only order
    replaced by remap-first (what the Llama loader does) must disagree with the release's remap."""
    from ckptlint.targets import resolve
    from conformance import kvscales

    t = resolve("sglang==0.5.5")[0]
    arch = t.architecture("MixtralForCausalLM")
    forged = arch.model_copy(update={"kv_scales": arch.kv_scales.model_copy(update={"order": "remap-first"})}) \
        if hasattr(arch, "model_copy") else None
    if forged is None:  # compiled data: a wrapped dict
        import copy

        forged = copy.deepcopy(arch)
        forged["kv_scales"]["order"] = "remap-first"
    remap = kvscales.remap_function("sglang", "0.5.5")
    bad = list(kvscales.disagreements(t, remap, {"MixtralForCausalLM": forged}))
    assert any(d.form == "proj" for d in bad), bad
