"""Skip-list matching primitives, on the exact names the frameworks see."""

from ckptlint.matching import compile_list


def m(mode, entries, name):
    return compile_list(mode, entries).first_match(name)


def test_exact_or_regex_is_start_anchored_not_end_anchored():
    # Quark/compressed-tensors `re:` entries use re.match: `re:.*v_proj` also matches `qkv_proj`.
    assert m("exact_or_regex", ["re:.*v_proj"], "model.layers.0.self_attn.qkv_proj")
    assert m("exact_or_regex", ["re:model.layers.78.*"], "model.layers.78")
    assert not m("exact_or_regex", ["model.layers.78.*"], "model.layers.78.self_attn.o_proj")  # glob is literal


def test_dotted_path_respects_component_boundaries():
    # SGLang fp8 _module_path_match (>= 0.5.12): `mlp.gate` no longer matches `mlp.gate_up_proj` (#23467).
    assert not m("dotted_path", ["mlp.gate"], "model.layers.1.mlp.gate_up_proj")
    assert m("dotted_path", ["mlp.gate"], "model.layers.1.mlp.gate")
    assert m("dotted_path", ["model.layers.1"], "model.layers.1.self_attn.o_proj")
    assert not m("dotted_path", ["model.layers.1"], "model.layers.10.self_attn.o_proj")


def test_substring_has_no_boundary():
    assert m("substring", ["model.layers.1"], "model.layers.10.mlp.down_proj")


def test_glob_component_matches_whole_path_or_any_component():
    assert m("glob_component", ["model.layers.61*"], "model.layers.61.self_attn.q_a_proj")
    assert not m("glob_component", ["model.layers.61*"], "model.decoder.self_attn.q_a_proj")
    assert m("glob_component", ["lm_head"], "model.shared_head.lm_head")
    # `…mlp.experts.*` does not fullmatch the FusedMoE prefix `…mlp.experts`.
    assert not m("glob_component", ["model.layers.3.mlp.experts.*"], "model.layers.3.mlp.experts")


def test_invalid_regex_never_matches_and_is_reported():
    cl = compile_list("exact_or_regex", ["re:([", "lm_head"])
    assert cl.first_match("lm_head") == "lm_head"
    assert cl.invalid() == ["re:(["]
