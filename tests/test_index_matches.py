"""``fileset.index_matches`` (the fast path of the index comparison) is exactly "the index's
(tensor, shard) pairs are the headers' pairs, each header tensor listed once": checked against
that definition on generated indexes and headers, including every way they can disagree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlint.checkpoint import ShardInfo, TensorInfo
from ckptlint.reader.fileset import index_matches
from ckptlint.reader.header import ShardRead

SHARDS = [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]
NAMES = [f"model.layers.{i}.mlp.experts.{e}.w{p}.weight" for i in range(3) for e in range(3) for p in (1, 2, 3)]


def _reads(layout: dict[str, list[str]]) -> dict[str, ShardRead]:
    return {s: ShardRead(info=ShardInfo(file=s, size=0), tensors={t: TensorInfo(t, "BF16", (2, 2), s) for t in ts})
            for s, ts in layout.items()}


def _definition(weight_map: dict[str, str], layout: dict[str, list[str]]) -> bool:
    pairs = [(t, s) for s, ts in layout.items() for t in ts]
    return len(pairs) == len(set(pairs)) == len({t for t, _ in pairs}) and set(pairs) == set(weight_map.items())


@st.composite
def cases(draw):
    # headers: each name in zero, one or two of the read shards
    layout: dict[str, list[str]] = {s: [] for s in draw(st.sets(st.sampled_from(SHARDS), min_size=1))}
    read = sorted(layout)
    for t in draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1)):
        for s in draw(st.lists(st.sampled_from(read), unique=True, min_size=1, max_size=2)):
            layout[s].append(t)
    # the index: either the headers' own pairs, or mutated
    weight_map = {t: s for s, ts in layout.items() for t in ts}
    for op in draw(st.lists(st.sampled_from(["none", "move", "drop", "add", "unread"]), max_size=3)):
        names = sorted(weight_map)
        if op == "move" and names:
            weight_map[draw(st.sampled_from(names))] = draw(st.sampled_from(read))
        elif op == "drop" and names:
            del weight_map[draw(st.sampled_from(names))]
        elif op == "add":
            weight_map[draw(st.sampled_from(NAMES))] = draw(st.sampled_from(read))
        elif op == "unread" and names:
            weight_map[draw(st.sampled_from(names))] = draw(st.sampled_from(SHARDS))
    return weight_map, layout


@settings(max_examples=400, deadline=None)
@given(cases())
def test_index_matches_is_pair_equality(case):
    weight_map, layout = case
    assert index_matches(weight_map, _reads(layout)) is _definition(weight_map, layout)


def test_each_disagreement_is_caught():
    layout = {SHARDS[0]: NAMES[:3], SHARDS[1]: NAMES[3:6]}
    good = {t: s for s, ts in layout.items() for t in ts}
    reads = _reads(layout)
    assert index_matches(good, reads)
    assert not index_matches({**good, NAMES[0]: SHARDS[1]}, reads)  # listed under the wrong shard
    assert not index_matches({k: v for k, v in good.items() if k != NAMES[4]}, reads)  # a tensor not listed
    assert not index_matches({**good, NAMES[9]: SHARDS[0]}, reads)  # listed, in no header
    assert not index_matches({**good, NAMES[0]: SHARDS[3]}, reads)  # a shard that was not read
    assert not index_matches(good, _reads({SHARDS[0]: NAMES[:3], SHARDS[1]: NAMES[2:6]}))  # one tensor in two shards
