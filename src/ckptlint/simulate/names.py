"""Stage 1, names: every checkpoint tensor to the runtime module a target loads it into.

Checkpoint modules (tensor name minus its parameter suffix) are renamed by the architecture's and
the draft's name mappers (target data ``rename``, compiled in ``Plan.renames``), grouped into fused
modules (``stacked``) and FusedMoE modules (``experts``), given a role (main model, MTP draft, extra
layer, dropped) and a kind (``kinds``). Expert modules, the bulk of a MoE checkpoint, are named once per checkpoint and
expert rule and shared by every target that uses the same rule.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ckptlint.checkpoint import Checkpoint, TensorInfo
from ckptlint.simulate.forms import module_groups
from ckptlint.simulate.model import Shard, Stored
from ckptlint.simulate.renames import fmt_mtp
from ckptlint.simulate.state import Building, State

if TYPE_CHECKING:
    from ckptlint.simulate.renames import NameMapper
    from ckptlint.targets.schema import Architecture, KindRule


def class_packed(arch, config: dict[str, Any]) -> dict[str, list[str]]:
    """The model class's packed_modules_mapping for this config.json: the class's own entries plus
    those it adds while it is constructed when a config key is set (``packed_modules_mapping_if``)."""
    out = dict(arch.packed_modules_mapping)
    for cond in arch.packed_modules_mapping_if:
        if config.get(cond.key):
            out.update(cond.mapping)
    return out


class _Namer:
    """Checkpoint module path -> (runtime module, shard query, expert, proj) for one role."""

    def __init__(self, arch: Architecture, config: dict[str, Any]):
        self.experts = experts_rx(arch.experts)
        self.stacked: dict[str, str] = {}
        for st in arch.stacked:
            if st.requires_config and config.get(st.requires_config) in (None, 0, False):
                continue
            for shard in st.shards:
                self.stacked[shard] = st.fused

    def name(self, module: str) -> tuple[str, str, int | None, str | None]:
        if self.experts is not None:
            m = self.experts.match(module)
            if m:
                moe, expert, proj = _expert_fields(m)
                return moe, module, expert, proj
        head, _, last = module.rpartition(".")
        fused = self.stacked.get(last)
        if fused is not None:
            return f"{head}.{fused}" if head else fused, module, None, last
        return module, module, None, None


@lru_cache(maxsize=64)
def experts_rx(pattern: str | None) -> re.Pattern[str] | None:
    """An architecture's expert rule (``Architecture.experts``) compiled, once for both naming paths."""
    return re.compile(pattern) if pattern else None


def _expert_fields(m: re.Match[str]) -> tuple[str, int, str]:
    """(FusedMoE module, expert index, projection) from a match of an architecture's expert rule."""
    moe, expert, proj = m.group("moe", "expert", "proj")
    return moe, int(expert), proj


class _ByShape:
    """An architecture's ``shape_kinds``: the kind of a module no ``kinds`` pattern names, from its stored form."""

    def __init__(self, arch: Architecture, config: dict[str, Any]):
        sk = arch.shape_kinds
        self.rule = sk
        if sk is None:
            return
        v, h = config.get(sk.vocab_key), config.get(sk.hidden_key)
        self.embed_shape = (v, h) if isinstance(v, int) and isinstance(h, int) else None
        self.lm_head = re.compile(sk.lm_head)
        self.ranks = set(sk.linear_ranks)
        self.layers = arch.layer_prefix  # embeddings and LM heads sit outside the decoder layers

    def kind(self, name: str, stored: Stored, has_matrix: bool) -> str:
        if self.rule is None:
            return "linear" if has_matrix else "other"
        if stored.quantized:
            return "linear"
        w = stored.weight
        if w is None:
            return "linear" if stored.scales else "other"  # scales alone: a Linear's, its weight elsewhere
        if len(w.shape) not in self.ranks:
            return "other"
        if self.embed_shape is not None and tuple(w.shape) == self.embed_shape and not name.startswith(self.layers):
            return "lm_head" if self.lm_head.search(name) else "embedding"
        return "linear"


def _kind(name: str, rules: list[tuple[re.Pattern[str], KindRule]], method: str | None,
          has_matrix: bool, stored: Stored, by_shape: _ByShape) -> tuple[str, str | None]:
    for rx, r in rules:
        if r.methods is not None and method not in r.methods:
            continue
        if rx.search(name):
            return r.kind, r.loader
    return by_shape.kind(name, stored, has_matrix), None


def build_modules(ckpt: Checkpoint, plan: State, config: dict[str, Any]) -> None:
    """Fill ``plan.modules`` (runtime module key -> ``Building``) and ``plan.dropped``."""
    arch = plan.arch
    assert arch is not None
    placer = _Placer(ckpt, plan, config)
    modules, mtp, nhl, draft_prefix = plan.modules, placer.mtp, placer.nhl, placer.draft_prefix
    # Most modules of a MoE checkpoint are experts of main-model layers, whose runtime module and
    # shard do not depend on the target beyond its expert naming rule: those come precomputed,
    # one run of consecutive modules per runtime module (e.g. one layer's 768 expert projections).
    # The other modules are placed one by one, with the renamed name and draft-prefix membership the
    # runs computed for them.
    for runtime, layer, in_draft_prefix, shards, groups in _expert_runs(ckpt, arch, plan.renames.modules,
                                                                        placer.draft_prefix, placer.draft_word):
        if runtime is None or in_draft_prefix or (layer is not None and (
                (layer in mtp and not draft_prefix) or (nhl is not None and layer >= nhl))):
            for g, name in groups:
                placer.place(*g, name, in_draft_prefix)
            continue
        rm = modules.get(runtime)
        if rm is not None and rm.role == "draft":
            modules[runtime + "@draft"] = modules.pop(runtime)
            rm = None
        if rm is None:
            first = groups[0][0]
            kind, loader = _kind(runtime, placer.main_kinds, placer.method_name, first[3], first[2], placer.by_shape)
            rm = modules[runtime] = Building(runtime, kind, loader, "main")
        rm.shards.extend(shards)


class _Placer:
    """Places one checkpoint module whose role the target decides (draft, dropped or extra) into its
    runtime module."""

    def __init__(self, ckpt: Checkpoint, plan: State, config: dict[str, Any]) -> None:
        arch = plan.arch
        self.plan = plan
        self.namer = _Namer(arch, config)
        self.method_name = plan.quant.method_key if plan.quant else None
        self.mtp = set(plan.mtp_layers)
        self.nhl = plan.num_hidden_layers
        self.draft = draft = plan.draft
        self.main_kinds = [(re.compile(r.pattern), r) for r in arch.kinds]
        self.draft_kinds = [(re.compile(r.pattern), r) for r in draft.kinds] + self.main_kinds if draft else self.main_kinds
        self.draft_renames = plan.renames.draft_modules
        self.named: dict[str, tuple[str, str, int | None, str | None]] = ckpt.cache.setdefault(
            ("namer", arch.experts, tuple(sorted(self.namer.stacked.items()))), {})
        self.draft_prefix = arch.draft.prefix if arch.draft is not None else None
        # names routed to the MTP draft by a substring anywhere (SGLang Qwen3-Next / Qwen3.5: `mtp`)
        self.draft_word = arch.draft.keep_substring if arch.draft is not None else None
        self.by_shape = _ByShape(arch, config)
        self.absent = [(re.compile(a.pattern), a.outcome) for a in arch.absent]

    def _absent(self, module: str, tensors: list[TensorInfo]) -> bool:
        """Record a checkpoint module the model class builds nothing for (Architecture.absent): dropped
        when its outcome is harmless, else kept for the LD901 finding. False when no rule matches."""
        for rx, outcome in self.absent:
            if rx.search(module):
                if outcome.consequence == "hygiene":
                    self._drop(tensors, outcome.note or "the model class has no module for it")
                else:
                    key = (rx.pattern, outcome.consequence, outcome.error, outcome.note)
                    self.plan.absent.setdefault(key, []).extend(t.name for t in tensors)
                return True
        return False

    def _drop(self, tensors: list[TensorInfo], why: str) -> None:
        for t in tensors:
            self.plan.dropped[t.name] = why

    def _role_and_name(self, module: str, tensors: list[TensorInfo], layer: int | None, renamed: str,
                       in_draft_prefix: bool) -> tuple[str, str] | None:
        """The module's role and the name the target looks it up under (None: not loaded); ``renamed``:
        the module after the architecture's name mapper."""
        draft, draft_prefix, word = self.draft, self.draft_prefix, self.draft_word
        if self.absent and self._absent(module, tensors):
            return None
        role = "main"
        if in_draft_prefix:
            if draft is None:
                self._drop(tensors, "MTP weights are not loaded with speculative decoding off")
                return None
            role = "draft"
        elif layer is not None and layer in self.mtp and not draft_prefix:
            if draft is None:
                self._drop(tensors, "MTP layer weights are not loaded with speculative decoding off")
                return None
            role = "draft"
        elif layer is not None and self.nhl is not None and layer >= self.nhl:
            role = "extra"
        if role != "draft":
            return role, renamed
        if not (module + ".").startswith(fmt_mtp(draft.keep_prefix, {"mtp": layer})) and not (word and word in module):
            return None
        hit = next((d for d in draft.drop if d in module), None)
        if hit is not None:
            self._drop(tensors, f"the draft loader drops `{hit}` weights (shared with the target model)")
            return None
        return role, self.draft_renames(module)

    def place(self, module: str, tensors: list[TensorInfo], stored: Stored, has_matrix: bool,
              layer: int | None, renamed: str, in_draft_prefix: bool) -> None:
        found = self._role_and_name(module, tensors, layer, renamed, in_draft_prefix)
        if found is None:
            return
        role, name = found
        hit = self.named.get(name)
        if hit is None:
            hit = self.named[name] = self.namer.name(name)
        runtime, query, expert, proj = hit
        key = runtime
        modules = self.plan.modules
        other = modules.get(runtime)
        if other is not None and other.role != role and "draft" in (role, other.role):
            # The draft reuses a main-model prefix (SGLang's Qwen3-Next draft builds model.layers.0):
            # keep both, the draft's under "<name>@draft".
            if role == "draft":
                key = runtime + "@draft"
            else:
                modules[runtime + "@draft"] = modules.pop(runtime)
        rm = modules.get(key)
        if rm is None:
            kinds = self.draft_kinds if role == "draft" else self.main_kinds
            kind, loader = _kind(runtime, kinds, self.method_name, has_matrix, stored, self.by_shape)
            rm = modules[key] = Building(runtime, kind, loader, role)
        rm.shards.append(Shard(module, query, tensors, stored, expert, proj))


Group = tuple[str, list[TensorInfo], Stored, bool, "int | None"]
Run = tuple["str | None", "int | None", bool, list[Shard], list[tuple[Group, str]]]


def _expert_runs(ckpt: Checkpoint, arch: Architecture, renames: NameMapper, draft_prefix: str | None,
                 draft_word: str | None = None) -> list[Run]:
    """The checkpoint's modules in checkpoint order, cut into runs: (runtime, layer, in draft
    prefix, shards, (module group, renamed name) pairs). Consecutive expert modules (``arch.experts``,
    after the architecture's name mapper ``renames``) of one FusedMoE module, layer and draft-prefix
    membership form one run with their shards built as main-model shards; every other module is in a
    run whose runtime is None, named per target. Depends only on the expert rule, renames and prefixes,
    so targets that share them (the SGLang and vLLM classes of one model usually do) share the work."""
    key = ("runs", arch.layer_prefix, arch.experts, renames.key, draft_prefix, draft_word)
    runs = ckpt.cache.get(key)
    if runs is not None:
        return runs
    runs = []
    rx = experts_rx(arch.experts)
    match = rx.match if rx is not None else None
    # the (moe, expert, proj) groups: all of the match's groups, in that order, in the usual rule
    plain = rx is not None and rx.groups == 3 and rx.groupindex == {"moe": 1, "expert": 2, "proj": 3}
    ints: dict[str, int] = {}  # expert index text -> int (a few hundred distinct values)
    last_rt: object = runs  # (nothing a module's runtime equals: the first module starts a run)
    last_layer: int | None = None
    last_dp = False
    cur_shards: list[Shard] = []
    cur_groups: list = []
    new_shard = tuple.__new__
    rename = renames if renames else None  # (asked once: NameMapper.__bool__ is a Python call)
    has_dp, word = bool(draft_prefix), draft_word or None
    for g in module_groups(ckpt, arch.layer_prefix):
        module, tensors, stored, _, layer = g
        name = rename(module) if rename is not None else module
        m = match(name) if match is not None else None
        # a draft kept under a top-level prefix (``Draft.prefix``), or a module holding the draft's
        # ``keep_substring`` anywhere (SGLang Qwen3-Next / Qwen3.5: `mtp`); inline, once per module
        in_dp = has_dp and ((module + ".").startswith(draft_prefix) or (word is not None and word in module))
        if m is not None:
            moe, e, proj = m.groups() if plain else m.group("moe", "expert", "proj")
            expert = ints.get(e)
            if expert is None:
                expert = ints[e] = int(e)
        else:
            moe = None
        if moe != last_rt or layer != last_layer or in_dp != last_dp:
            cur_shards, cur_groups = [], []
            runs.append((moe, layer, in_dp, cur_shards, cur_groups))
            last_rt, last_layer, last_dp = moe, layer, in_dp
        if m is not None:
            cur_shards.append(new_shard(Shard, (module, name, tensors, stored, expert, proj)))
        cur_groups.append((g, name))
    ckpt.cache[key] = runs
    return runs

