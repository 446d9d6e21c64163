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


# --------------------------------------------------------------------------- the keyed index

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ckptlint.matching import _MIN_KEYED, CompiledList  # noqa: E402

_part = st.sampled_from(["model", "layers", "0", "1", "10", "mlp", "gate", "gate_up_proj", "experts", "", "lm_head"])
_name = st.lists(_part, min_size=1, max_size=6).map(".".join)
_entry = st.one_of(_name, _name.map(lambda n: n + "."), _name.map(lambda n: "re:" + n.replace(".", r"\.") + ".*"),
                   st.just("re:(["))


def _linear(cl: CompiledList, name: str) -> str | None:
    for entry, pred in zip(cl.entries, cl.preds):
        if pred is not None and pred(name):
            return entry
    return None


@settings(max_examples=300, deadline=None)
@given(mode=st.sampled_from(sorted(_MIN_KEYED)), entries=st.lists(_entry, min_size=0, max_size=40),
       names=st.lists(_name, min_size=1, max_size=10))
def test_keyed_lists_pick_the_same_first_entry_as_a_scan(mode, entries, names):
    """The dict index of long literal lists is an optimisation only: the first entry in written order
    that matches is the same as testing every entry's predicate in turn (re: entries, invalid ones,
    duplicates and keys with trailing dots included)."""
    cl = compile_list(mode, entries * (1 + _MIN_KEYED[mode] // max(1, len(entries))))
    lits = [e for e in entries[:8] if not e.startswith("re:")]
    derived = [w for e in lits for w in (e, "model." + e, e + ".weight", "x.y." + e + ".z")]
    for name in names + derived:
        assert cl.first_rule(name) == _linear(cl, name)


def test_keyed_exclude_list_of_module_names():
    # a Quark-style exclude list of hundreds of module names, with a regex in the middle
    entries = [f"model.layers.{i}.mlp.gate" for i in range(300)] + ["re:.*shared_experts.*"] + ["lm_head"]
    cl = compile_list("exact_or_regex", entries)
    assert cl._first is not None
    assert cl.first_match("model.layers.7.mlp.gate") == "model.layers.7.mlp.gate"
    assert cl.first_match("model.layers.7.mlp.shared_experts.down_proj") == "re:.*shared_experts.*"
    assert cl.first_match("lm_head") == "lm_head"
    assert cl.first_match("model.layers.7.mlp.gate_up_proj") is None


def test_keyed_list_prefers_an_earlier_literal_to_a_later_regex():
    entries = ["model.layers.1.mlp.gate", "re:model.*"] + [f"lm_head.{i}" for i in range(10)]
    cl = compile_list("exact_or_regex", entries)
    assert cl.first_match("model.layers.1.mlp.gate") == "model.layers.1.mlp.gate"
    assert cl.first_match("model.layers.2.mlp.gate") == "re:model.*"
    cl = compile_list("exact_or_regex", ["re:model.*"] + entries)
    assert cl.first_match("model.layers.1.mlp.gate") == "re:model.*"


_tiny = st.lists(st.sampled_from(["a", "b", ""]), min_size=1, max_size=7).map(".".join)


@settings(max_examples=200, deadline=None)
@given(mode=st.sampled_from(sorted(_MIN_KEYED)), entries=st.lists(st.one_of(_tiny, _tiny.map(lambda n: n + ".")),
                                                                   min_size=1, max_size=30),
       names=st.lists(_tiny, min_size=1, max_size=12))
def test_keyed_lists_on_repetitive_components(mode, entries, names):
    """Names and entries over two letters and the empty component (``a.a.b``, ``a..a``) make runs that
    overlap and restart: the component automaton's failure links must still find the first entry."""
    cl = compile_list(mode, entries * (1 + _MIN_KEYED[mode] // len(entries)))
    assert cl._first is not None
    for name in names + [e + "." + e for e in entries[:5]] + ["a." + e + ".b" for e in entries[:5]]:
        assert cl.first_rule(name) == _linear(cl, name), name


def test_keyed_work_per_name_is_linear_in_its_components():
    """A name of thousands of components under a long dotted-path list costs time and memory linear in
    the name (before: every run of components was a candidate key, O(K^2) strings of O(K) characters)."""
    import time
    import tracemalloc

    for mode in ("dotted_path", "dotted_path_strip", "suffix"):
        cl = compile_list(mode, [f"model.layers.{i}.mlp" for i in range(100)] + ["a1.a2.a3.a4", "a9.a0.a1"])
        costs = []
        for k in (2_000, 8_000):
            name = ".".join(f"a{i % 10}" for i in range(k)) + ".weight"
            tracemalloc.start()
            t0 = time.perf_counter()
            hit = cl.first_rule(name)
            secs = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert hit == _linear(cl, name)
            costs.append((secs, peak))
        # four times the components: at most ~4x the memory (plus slack), far from 16x
        assert costs[1][1] < 6 * costs[0][1] + (64 << 10), (mode, costs)
        assert costs[1][0] < 1.0, (mode, costs)


_glob = st.one_of(_tiny, _tiny.map(lambda n: "language_model." + n), st.sampled_from(["*a*", "a*", "b.*", "*", "a[b", "x?"]))


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(_glob, min_size=1, max_size=30), names=st.lists(_tiny, min_size=1, max_size=12))
def test_glob_component_index_picks_the_same_first_entry_as_a_scan(entries, names):
    """glob_component lists index their wildcard-free entries by text: the first matching entry in
    written order is the same as trying every glob on the name, its `language_model.`-less form and
    each component."""
    cl = compile_list("glob_component", entries * (1 + 16 // len(entries)))
    for name in names + ["language_model." + n for n in names[:3]] + [e + ".a" for e in entries[:5]]:
        assert cl.first_rule(name) == _linear(cl, name), name


def test_glob_component_long_name_is_linear():
    import time

    cl = compile_list("glob_component", [f"model.layers.{i}.mlp.x{i}" for i in range(2000)] + ["lm_head"])
    assert cl._components is not None
    name = ".".join(f"a{i}" for i in range(20_000))
    t0 = time.perf_counter()
    assert cl.first_rule(name) is None and cl.first_rule(name + ".lm_head") == "lm_head"
    assert time.perf_counter() - t0 < 0.5  # before: 2,000 entries x 20,000 components of regex calls
