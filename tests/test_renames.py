"""The name-mapper type (ckptlint.simulate.renames): each rule kind, first match, count, {mtp}, plain-only
lists, composition, and the semantics of the fields it replaced (Architecture.rename / skiplist_rename /
quant_rename, Draft.rename, Draft.mapper_substr), checked against the functions that applied them."""

import re

import pytest

from ckptlint._ns import wrap
from ckptlint.simulate.renames import NameMapper, Renames, name_mapper
from ckptlint.targets import list_targets
from ckptlint.targets.schema import Architecture, Draft, NameRule


def rules(*specs):
    return [NameRule.model_validate(s) for s in specs]


def test_regex_rule_is_searched_and_uses_a_replacement_template():
    m = name_mapper(rules({"pattern": r"^(model\.layers\.\d+)\.shared_head\.head$", "to": r"\1.head"}))
    assert m("model.layers.61.shared_head.head") == "model.layers.61.head"
    assert m("model.layers.61.shared_head.norm") == "model.layers.61.shared_head.norm"
    # searched, not matched at the start
    assert name_mapper(rules({"pattern": r"\.self_attn\.", "to": ".attn."}))("model.layers.0.self_attn.o_proj") \
        == "model.layers.0.attn.o_proj"


def test_prefix_rule_only_at_the_start_and_literal():
    m = name_mapper(rules({"kind": "prefix", "pattern": "transformer.", "to": "model."}))
    assert m("transformer.h.0.attn") == "model.h.0.attn"
    assert m("x.transformer.h.0") == "x.transformer.h.0"
    assert m("transformerXh") == "transformerXh"  # `.` is a literal dot, not any character
    assert name_mapper(rules({"kind": "prefix", "pattern": "a.", "to": r"b\1."}))("a.c") == r"b\1.c"


def test_suffix_rule_only_at_the_end():
    m = name_mapper(rules({"kind": "suffix", "pattern": ".w1", "to": ".gate_proj"}))
    assert m("layers.0.w1") == "layers.0.gate_proj"
    assert m("layers.0.w1.x") == "layers.0.w1.x"
    assert m("a.w1.b.w1") == "a.w1.b.gate_proj"


def test_substring_rule_first_occurrence_by_default_literal_text():
    m = name_mapper(rules({"kind": "substring", "pattern": "model.layers.61", "to": "model.decoder"}))
    assert m("model.layers.61.mlp") == "model.decoder.mlp"
    assert m("re:model.layers.61.*") == "re:model.decoder.*"
    assert m("model.layers.610") == "model.decoder0"  # a substring, not a component
    assert m("model.layers.61.model.layers.61") == "model.decoder.model.layers.61"
    assert m("modelXlayersX61") == "modelXlayersX61"
    assert name_mapper(rules({"kind": "substring", "pattern": "(", "to": "["}))("a(b") == "a[b"


@pytest.mark.parametrize("kind,pattern", [("regex", "mtp"), ("substring", "mtp")])
def test_count(kind, pattern):
    name = "mtp.layers.0.mtp_block.mtp"
    one = name_mapper(rules({"kind": kind, "pattern": pattern, "to": "model"}))
    every = name_mapper(rules({"kind": kind, "pattern": pattern, "to": "model", "count": 0}))
    two = name_mapper(rules({"kind": kind, "pattern": pattern, "to": "model", "count": 2}))
    assert one(name) == "model.layers.0.mtp_block.mtp"
    assert every(name) == "model.layers.0.model_block.model" == name.replace("mtp", "model")
    assert two(name) == "model.layers.0.model_block.mtp"


def test_first_matching_rule_applies_alone():
    m = name_mapper(rules(
        {"pattern": r"^model\.layers\.61\.(?=(eh_proj|enorm)\b)", "to": "model."},
        {"pattern": r"^model\.layers\.61\.", "to": "model.decoder."},
    ))
    assert m("model.layers.61.eh_proj") == "model.eh_proj"  # the second rule would also match the result's input
    assert m("model.layers.61.mlp.experts") == "model.decoder.mlp.experts"
    assert m("model.layers.60.mlp") == "model.layers.60.mlp"


def test_mtp_is_the_layer_index_in_patterns_only():
    rs = rules({"pattern": r"^model\.layers\.{mtp}\.", "to": "model.decoder.{mtp}."},
               {"kind": "prefix", "pattern": "mtp.{mtp}.", "to": "x."})
    m = name_mapper(rs, mtp=78)
    assert m("model.layers.78.mlp") == "model.decoder.{mtp}.mlp"
    assert m("model.layers.77.mlp") == "model.layers.77.mlp"
    assert m("mtp.78.fc") == "x.fc"
    assert name_mapper(rs, mtp=3)("model.layers.78.mlp") == "model.layers.78.mlp"


def test_plain_only_leaves_regex_and_glob_entries():
    rs = rules({"kind": "prefix", "pattern": "model.", "to": "language_model.model."})
    assert name_mapper(rs, plain_only=True)("model.layers.0.mlp") == "language_model.model.layers.0.mlp"
    assert name_mapper(rs, plain_only=True)("re:model.layers.*") == "re:model.layers.*"
    assert name_mapper(rs, plain_only=True)("model.layers.*.mlp") == "model.layers.*.mlp"
    assert name_mapper(rs)("model.layers.*.mlp") == "language_model.model.layers.*.mlp"


def test_composition_applies_each_mapper_to_the_result_of_the_last():
    a = name_mapper(rules({"kind": "prefix", "pattern": "transformer.", "to": "model."}))
    b = name_mapper(rules({"kind": "prefix", "pattern": "model.", "to": "language_model.model."}))
    assert a.then(b)("transformer.h.0") == "language_model.model.h.0"
    assert b.then(a)("transformer.h.0") == "model.h.0"
    assert not NameMapper() and not name_mapper([]).then(name_mapper([])) and a.then(NameMapper())
    assert a.then(b).key == a.key + b.key != b.then(a).key


def test_compiled_once_per_distinct_list_validated_or_compiled_data():
    spec = {"kind": "regex", "pattern": r"\.self_attn\.", "to": ".attn.", "count": 1}
    assert name_mapper(rules(spec)) is name_mapper(wrap([spec]))
    assert name_mapper(rules(spec)) is not name_mapper(rules({**spec, "count": 0}))


def test_renames_compose_the_architecture_and_draft_fields():
    arch = Architecture.model_validate({
        "rename": [{"kind": "prefix", "pattern": "transformer.", "to": "model."}],
        "skiplist_rename": [{"kind": "prefix", "pattern": "model.", "to": "language_model.model."}],
        "quant_rename": [{"pattern": r"^(model\.layers\.\d+)\.block_sparse_moe\.experts$", "to": r"\1.mlp.experts"}],
    })
    draft = Draft.model_validate({
        "class": "X", "rename": [{"pattern": r"^model\.layers\.{mtp}\.", "to": "model.decoder."}],
        "skiplist_rename": [{"kind": "substring", "pattern": "model.layers.61", "to": "model.decoder"}]})
    r = Renames(arch, draft, 61)
    assert r.modules("transformer.h.0.mlp") == "model.h.0.mlp"
    # the skip list: the model's mapper, then the lists-only one; `re:` and glob entries left alone
    assert r.skip_list("transformer.h.0.mlp") == "language_model.model.h.0.mlp"
    assert r.skip_list("model.h.0.mlp") == "language_model.model.h.0.mlp"
    assert r.skip_list("re:transformer.h.0.*") == "re:transformer.h.0.*"
    assert r.entries("transformer.h.0.mlp") == "model.h.0.mlp"
    # quant-config prefixes: main-model modules only
    assert r.quant_name("model.layers.3.block_sparse_moe.experts") == "model.layers.3.mlp.experts"
    assert r.quant_name("model.layers.3.block_sparse_moe.experts", "draft") == "model.layers.3.block_sparse_moe.experts"
    assert r.draft_modules("model.layers.61.mlp.experts") == "model.decoder.mlp.experts"
    # the draft class's skip-list mapper rewrites every entry's text, `re:` entries too
    assert r.draft_skip_list("re:model.layers.61.*") == "re:model.decoder.*"
    none = Renames(Architecture.model_validate({}))
    assert not none.modules and not none.draft_modules and none.quant_name("a.b") == "a.b"


# --- the functions the type replaced, as they applied each field (ckptlint before issue 30) ---------

def _old_rename_entry(entry, rs):  # Architecture.rename / skiplist_rename on the quant config's lists
    if entry.startswith("re:") or "*" in entry:
        return entry
    for r in rs:
        new, n = re.subn(r.pattern, r.to, entry, count=1)
        if n:
            return new
    return entry


def _old_renamed(name, compiled):  # module names: [(rx, to)] or [(rx, to, count)], first search hit
    for rule in compiled:
        rx, to = rule[0], rule[1]
        if rx.search(name):
            return rx.sub(to, name, count=rule[2] if len(rule) > 2 else 1)
    return name


def _old_map_substr(entry, mapper):  # Draft.mapper_substr: the longest key first, first occurrence
    for key in sorted(mapper, key=len, reverse=True):
        if key in entry:
            return entry.replace(key, mapper[key], 1)
    return entry


NAMES = ["model.layers.0.self_attn.q_proj", "model.layers.61.mlp.experts.3.gate_proj", "model.layers.61.eh_proj",
         "model.layers.61.shared_head.head", "re:model.layers.61.*", "model.layers.61.*", "mtp.fc", "mtp.layers.0.mtp",
         "model.language_model.layers.2.mlp", "model.visual.blocks.0", "lm_head", "transformer.h.1.attn",
         "model.layers.610.x", "model.layers.3.block_sparse_moe.experts", "", "model.layers.61"]


def _every_architecture():
    for t in list_targets():
        for name in t.data.architectures:
            yield t, name, t.architecture(name)


def test_same_names_as_the_replaced_functions_on_every_release():
    seen = 0
    for t, name, arch in _every_architecture():
        draft = arch.draft
        mtp = 61
        r = Renames(arch, draft, mtp)
        main = [(re.compile(x.pattern), x.to) for x in arch.rename]
        quant = [(re.compile(x.pattern), x.to, x.count) for x in arch.quant_rename]
        for n in NAMES:
            assert r.modules(n) == _old_renamed(n, main), (t.id, name, n)
            assert r.skip_list(n) == _old_rename_entry(_old_rename_entry(n, arch.rename), arch.skiplist_rename)
            assert r.entries(n) == _old_rename_entry(n, arch.rename)
            assert r.quant_name(n) == _old_renamed(n, quant)
            if draft is not None:
                d = [(re.compile(x.pattern.replace("{mtp}", str(mtp))), x.to, x.count) for x in draft.rename]
                substr = {x.pattern: x.to for x in draft.skiplist_rename if x.kind == "substring"}
                assert all(x.kind == "substring" for x in draft.skiplist_rename)
                assert r.draft_modules(n) == _old_renamed(n, d), (t.id, name, n)
                if draft.exclude_copy is not None:  # (its copies were renamed one occurrence per rule)
                    assert r.draft_modules(n) == _old_renamed(n, [x[:2] for x in d])
                assert r.draft_skip_list(n) == _old_map_substr(n, substr), (t.id, name, n)
                seen += 1
    assert seen


def test_extracted_mapper_rules_rename_like_the_escaped_regexes_they_replaced():
    """class_facts wrote a WeightsMapper's prefix / suffix / substring rules as escaped regexes with an
    escaped replacement; the literal kinds rename the same."""
    from ckptlint.targets import class_facts as cf
    from ckptlint.targets.extracted_classes import class_facts, class_keys, has_classes

    seen = 0
    for t in list_targets():
        if not has_classes(t.framework, t.version):
            continue
        for key in class_keys(t.framework, t.version):
            rs, _ = cf._renames(class_facts(t.framework, t.version, key))
            if not rs:
                continue
            m = name_mapper(rules(*rs))
            old = []
            for x in rs:
                esc = re.escape(x["pattern"])
                pattern = {"prefix": "^" + esc, "suffix": esc + "$"}.get(x["kind"], esc)
                old.append((re.compile(pattern), x["to"].replace("\\", "\\\\")))
            for n in NAMES + [x["pattern"] + ".weight" for x in rs] + ["a." + x["pattern"] for x in rs]:
                assert m(n) == _old_renamed(n, old), (t.id, key, n)
            seen += 1
    assert seen
