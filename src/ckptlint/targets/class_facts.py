"""A model class's extracted loading facts (one ``classes.json`` entry) translated into the fields of
an :class:`~ckptlint.targets.schema.Architecture`: fused shards, packed modules, expert naming,
sub-layers and their quant config, name-mapper renames, quant-config prefixes, expert blocks the class
does not build, and what ``load_weights`` does with a name it has no parameter for.

Pure functions of the facts (and the framework's name); reading the files and layering the result
over the hand-written and generic data is :mod:`ckptlint.targets.extracted_classes`.
"""

from __future__ import annotations

import re
from typing import Any

# The Architecture fields extraction can fill, in the order the finding lists them.
FACTS = ("stacked", "packed_modules_mapping", "packed_modules_mapping_if", "experts", "expert_w13", "expert_w2",
         "kinds", "rename", "quant_rename", "absent", "unexpected")

_SHARD_RANK = {"q": 0, "k": 1, "v": 2}
_MOE = re.compile(r"MoE|Moe|Experts|get_moe_impl_class\(\)")
_LINEAR = re.compile(r"Linear|LMHead")
_GATE_CLASSES = re.compile(r"Gate|Router")


def _tail(path: str) -> tuple[str, bool]:
    """(regex for a runtime module path from the tree, whether it sits inside the layer list)."""
    if ".{N}." in path:
        head, tail = path.split(".{N}.", 1)
        if head == "layers" or head.endswith(".layers"):  # the decoder layers (and a draft's, named alike)
            return r"\." + re.escape(tail).replace(r"\{N\}", r"\d+") + "$", True
        # another list (a vision tower's blocks): the whole path, so that it names nothing in the decoder
        return "^" + re.escape(path).replace(r"\{N\}", r"\d+") + "$", False
    return "^" + re.escape(path).replace(r"\{N\}", r"\d+") + "$", False


def _stacked(facts: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """Stacked fusions from the literal tables of the loaders in the class's tree and the mapper's
    ``orig_to_new_stacked``. None: no literal table anywhere (generic)."""
    rows: list[tuple[str, str, Any]] = []
    found = False
    notes: list[str] = []
    tables = list((facts.get("tree") or {}).get("stacked") or [])
    for t in tables:
        if t.get("rows") == "<dynamic>":
            notes.append(f"a stacked_params_mapping built at run time ({t.get('class', '?')})")
            continue
        found = True
        for r in t["rows"]:
            if len(r) >= 3 and isinstance(r[0], str) and isinstance(r[1], str) and "experts" not in r[0]:
                rows.append((r[0], r[1], r[2]))
    for m in _mappers(facts):
        for src, dst in (m.get("orig_to_new_stacked") or {}).items():
            if isinstance(dst, list) and dst and isinstance(dst[0], str):
                found = True
                rows.append((dst[0], src, dst[1] if len(dst) > 1 else None))
    if not found:
        return None, notes
    fused: dict[str, list[str]] = {}
    order: dict[str, Any] = {}
    for param, shard, sid in rows:
        p, s = param.strip("."), shard.strip(".")
        if "." in p or "." in s:  # a dotted row: keep its last components when they share the parent
            ph, _, p = p.rpartition(".")
            sh, _, s = s.rpartition(".")
            if ph != sh:
                continue
        if p == s:
            continue
        lst = fused.setdefault(p, [])
        if s not in lst:
            lst.append(s)
            order[s] = sid
    for p, lst in fused.items():  # shard order: the loader's shard ids (q, k, v / 0, 1, ...) where it gives them
        ids = [_rank(order[x]) for x in lst]
        if None not in ids and len(set(ids)) == len(ids):
            lst.sort(key=lambda x: _rank(order[x]))
    return [{"fused": f, "shards": sh, "requires_config": None} for f, sh in fused.items()], notes


def _rank(sid: Any) -> int | None:
    """A shard id's position: q/k/v, or an integer (None: anything else)."""
    if isinstance(sid, str):
        return _SHARD_RANK.get(sid)
    return sid if isinstance(sid, int) and not isinstance(sid, bool) else None


def _mappers(facts: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for v in (facts.get("mappers_resolved") or {}).values():
        out += [m for m in (v if isinstance(v, list) else [v]) if isinstance(m, dict) and "ref" not in m]
    return out


def _packed(facts: dict[str, Any]) -> tuple[dict[str, list[str]] | None, list[dict[str, Any]], list[str]]:
    pm = facts.get("packed_modules_mapping", facts.get("packed_modules_mapping_inherited"))
    notes: list[str] = []
    if isinstance(pm, dict) and (pm.get("unresolved") or "ref" in pm):
        return None, [], [f"packed_modules_mapping names {pm.get('ref')}, not resolved"]
    base: dict[str, list[str]] = {}
    if isinstance(pm, dict):
        for k, v in pm.items():
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                base[k] = v
            else:
                notes.append(f"packed_modules_mapping[{k!r}] is computed")
    cond: list[dict[str, Any]] = []
    init = facts.get("packed_init")
    if init is None and isinstance(facts.get("packed_init_inherited"), dict):
        init = facts["packed_init_inherited"].get("entries")
    for e in init or []:
        mapping = e.get("set") or e.get("update") or e.get("assign")
        if not isinstance(mapping, dict):
            notes.append("__init__ changes packed_modules_mapping with a computed value")
            continue
        mapping = {k: v for k, v in mapping.items() if isinstance(v, list) and all(isinstance(x, str) for x in v)}
        key = e.get("if")
        if key is None:
            if "assign" in e:
                base = dict(mapping)
            else:
                base.update(mapping)
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            cond.append({"key": key, "mapping": mapping})  # (PackedIf: every field)
        else:
            notes.append(f"__init__ adds packed_modules_mapping entries under a condition ckptlint does not model "
                         f"({key})")
    return base, cond, notes


def _experts(facts: dict[str, Any], framework: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[str]]:
    tree = facts.get("tree") or {}
    moe_leaves = [leaf for leaf in tree.get("leaves", []) if _MOE.search(leaf["class"])
                  and not _GATE_CLASSES.search(leaf["class"]) and leaf["path"].endswith("experts")]
    if not moe_leaves:
        return None, [], []
    names: list[tuple[str, str | None, str]] = []
    for leaf in moe_leaves:
        ck = leaf.get("ckpt_names")
        if isinstance(ck, list) and len(ck) == 3 and all(isinstance(x, (str, type(None))) for x in ck):
            names.append((ck[0], ck[2], ck[1]))
    for e in tree.get("expert_mapping", []):
        g, d, u = e.get("gate"), e.get("down"), e.get("up")
        if all(isinstance(x, (str, type(None))) for x in (g, d, u)) and isinstance(g, str) and isinstance(d, str):
            names.append((g, u, d))
    notes: list[str] = []
    if not names:
        return None, [], ["expert projection names are not literal"]
    w13: list[str] = []
    w2: list[str] = []
    for g, u, d in names:
        for x in (g, u):
            if x and x not in w13:
                w13.append(x)
        if d not in w2:
            w2.append(d)
    tails = sorted({_tail(leaf["path"])[0] for leaf in moe_leaves})
    inner = "|".join(t[2:-1] if t.startswith(r"\.") else t[1:-1] for t in tails)
    projs = "|".join(re.escape(p) for p in w13 + w2)
    regex = rf"^(?P<moe>.+\.(?:{inner}))\.(?P<expert>\d+)\.(?P<proj>{projs})$"
    kinds = [{"pattern": rf"\.(?:{inner})$", "kind": "moe", "loader": "FusedMoE", "methods": None}]
    return {"experts": regex, "expert_w13": w13, "expert_w2": w2}, kinds, notes


# MoE blocks other classes keep their experts under (the generic rules' expert naming)
_EXPERT_BLOCKS = ("mlp", "block_sparse_moe", "moe", "feed_forward")


def _absent_expert_blocks(facts: dict[str, Any]) -> tuple[str, list[str], list[str]] | None:
    """(regex, blocks, the class's own FusedMoE paths) for routed-expert names under a block of the decoder layer that the class does not
    build (e.g. `mlp.experts.N.gate_proj` for a class whose layers hold `block_sparse_moe` only): the
    loader has no parameter for any of them. None when the class has no FusedMoE in its layer list, or
    builds every such block."""
    leaves = (facts.get("tree") or {}).get("leaves", [])
    moe = [leaf["path"] for leaf in leaves if _MOE.search(leaf["class"]) and leaf["path"].endswith("experts")
           and ".{N}." in leaf["path"]]
    if not moe:
        return None
    layer = moe[0].split(".{N}.", 1)[0]
    built = {leaf["path"].split(".{N}.", 1)[1].split(".", 1)[0] for leaf in leaves
             if leaf["path"].startswith(layer + ".{N}.")}
    # (a block the name mapper renames into one the class builds is not missing: MiniMax-M3 maps
    # `.block_sparse_moe.` to `.mlp.`)
    # (whole name components: `block_sparse_moe` in a mapper does not make `moe` a renamed block)
    mapped = {part for m in _mappers(facts) for kind, table in m.items() if isinstance(table, dict)
              for src in table for part in str(src).split(".")}
    missing = [b for b in _EXPERT_BLOCKS if b not in built and b not in mapped]
    if not missing:
        return None
    rx = "^" + re.escape(layer) + r"\.\d+\.(?:" + "|".join(missing) + r")\.experts\.\d+\."
    return rx, missing, sorted({p.split(".{N}.", 1)[1] for p in moe})


_PLACEHOLDER = re.compile(r"\{[^}]*\}")


def _quant_renames(facts: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Quantizable sub-layers whose quant-config prefix (what the method tests its lists against) is not
    their attribute path (what the parameters and checkpoint names follow), as ``quant_rename`` rules from
    the path to the prefix (``{N}``: the same layer index). A prefix with a computed part, or a path built
    with different prefixes in different branches, is left unmodelled (a note)."""
    seen: dict[str, set[str | None]] = {}
    for leaf in (facts.get("tree") or {}).get("leaves", []):
        if leaf["quant"] == "passed" and (_LINEAR.search(leaf["class"]) or _MOE.search(leaf["class"])):
            seen.setdefault(leaf["path"], set()).add(leaf.get("prefix"))
    rules: list[dict[str, Any]] = []
    notes: list[str] = []
    for path, prefixes in sorted(seen.items()):
        if prefixes == {None}:
            continue
        if len(prefixes) > 1:
            notes.append(f"`{path}` is built with different quant-config prefixes depending on the configuration")
            continue
        prefix = next(iter(prefixes))
        parts = _PLACEHOLDER.findall(path) + _PLACEHOLDER.findall(prefix)
        if any(p != "{N}" for p in parts) or path.count("{N}") != prefix.count("{N}"):
            notes.append(f"the quant config's lists are tested against `{prefix}` for `{path}` (a prefix ckptlint "
                         "cannot compute); ckptlint tests the attribute path")
            continue
        pattern = "^" + re.escape(path).replace(r"\{N\}", r"(\d+)") + "$"
        pieces = prefix.replace("\\", "\\\\").split("{N}")
        to = pieces[0] + "".join(f"\\g<{i}>" + piece for i, piece in enumerate(pieces[1:], 1))
        rules.append({"kind": "regex", "pattern": pattern, "to": to, "count": 1})
    return rules, notes


def _sublayer_kinds(facts: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Kinds of the Linear-like sub-layers from the quant config each is built with: passed -> the
    method decides (``linear``; ``lm_head`` for an LM head); None or not passed -> ``unquantized_linear``
    (``plain`` for a bare nn.Linear). Paths whose builds disagree (conditional branches) are left generic."""
    by_rx: dict[str, set[tuple[str, str]]] = {}
    for leaf in (facts.get("tree") or {}).get("leaves", []):
        cls, quant = leaf["class"], leaf["quant"]
        if not _LINEAR.search(cls) or _MOE.search(cls):
            continue
        rx, _ = _tail(leaf["path"])
        plain = cls in ("nn.Linear", "torch.nn.Linear", "Linear")
        head = "LMHead" in cls
        if quant == "passed":
            kind = "lm_head" if head else ("plain" if plain else "linear")
        elif quant in ("none", "absent"):
            kind = "plain" if plain else "unquantized_linear"
        else:
            kind = "?"
        by_rx.setdefault(rx, set()).add((kind, cls))
    kinds: list[dict[str, Any]] = []
    notes: list[str] = []
    for rx, seen in sorted(by_rx.items()):
        ks = {k for k, _ in seen}
        if len(ks) != 1 or "?" in ks:
            notes.append(f"`{rx}` is built with or without the quant config depending on the configuration")
            continue
        kind = ks.pop()
        cls = sorted(c for _, c in seen)[0]
        kinds.append({"pattern": rx, "kind": kind, "loader": cls.rpartition(".")[2], "methods": None})
    # The specific rules first: paths with more components before shorter ones.
    kinds.sort(key=lambda k: (-k["pattern"].count(r"\."), k["pattern"]))
    return kinds, notes


# WeightsMapper tables -> NameRule kinds (any other table is matched as a substring)
_MAPPER_KINDS = {"orig_to_new_prefix": "prefix", "orig_to_new_suffix": "suffix"}


def _renames(facts: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """The WeightsMapper's prefix / suffix / substring rules as one name mapper (``NameRule`` records,
    first match wins). A mapper with rules of more than one kind, or computed ones, is left generic (a
    mapper applies one rule per kind)."""
    rules: list[dict[str, Any]] = []
    kinds_used: set[str] = set()
    notes: list[str] = []
    for m in _mappers(facts):
        for kind, table in m.items():
            if kind == "orig_to_new_stacked":
                continue
            if not isinstance(table, dict):
                notes.append(f"the name mapper's {kind} is computed")
                continue
            for src, dst in table.items():
                if not isinstance(dst, str) or src.startswith("**"):
                    if dst is None:
                        notes.append(f"the name mapper drops `{src}` names ({kind})")
                    else:
                        notes.append(f"the name mapper's {kind} rule for `{src}` is computed")
                    continue
                kinds_used.add(kind)
                rules.append({"kind": _MAPPER_KINDS.get(kind, "substring"), "pattern": src, "to": dst, "count": 1})
    for mi in facts.get("mappers_init") or []:
        notes.append(f"__init__ changes {mi.get('attr')}" + (f" when {mi['if']}" if mi.get("if") else ""))
    if len(kinds_used) > 1:
        return None, notes + ["the name mapper combines prefix, suffix and substring rules"]
    return rules, notes


def extracted_fields(facts: dict[str, Any], framework: str) -> tuple[dict[str, Any], list[str]]:
    """(Architecture fields the facts give, notes on what they leave to the generic rules)."""
    out: dict[str, Any] = {}
    notes: list[str] = []
    stacked, n = _stacked(facts)
    notes += n
    if stacked is not None:
        out["stacked"] = stacked
    packed, cond, n = _packed(facts)
    notes += n
    if packed is not None:
        out["packed_modules_mapping"] = packed
        if cond:
            out["packed_modules_mapping_if"] = cond
    ex, moe_kinds, n = _experts(facts, framework)
    notes += n
    if ex is not None:
        out.update(ex)
    kinds, n = _sublayer_kinds(facts)
    notes += n
    if kinds or moe_kinds:
        out["kinds"] = moe_kinds + kinds
    renames, n = _renames(facts)
    notes += n
    if renames:
        out["rename"] = renames
    qrenames, n = _quant_renames(facts)
    notes += n
    if qrenames:
        out["quant_rename"] = qrenames
    absent = _absent_expert_blocks(facts)
    if absent is not None:
        out["absent_experts"] = absent
    guard = facts.get("unexpected_other")
    if isinstance(guard, dict) and guard.get("guard") in ("unguarded", "guarded"):
        out["unexpected_other"] = guard  # (unknown: the generic rule, which TG605 names)
    return out, notes


def unexpected_rule(guard: dict[str, Any], key: str) -> dict[str, Any]:
    """``Architecture.unexpected`` for the other-names branch the extractor read (stacked and expert names
    keep the generic outcome): ``params_dict[name]`` without a membership test raises Python's KeyError
    with the checkpoint name (``.bias`` names skipped first where the loader tests them); a membership test
    skips the name silently."""
    cls = key.rpartition(":")[2]
    if guard["guard"] == "unguarded":
        bias = bool(guard.get("bias_skipped"))
        note = (f"{cls}.load_weights indexes params_dict with a name no stacked or expert row matched without "
                "testing membership first" + (" (only a missing `.bias` is skipped)" if bias else "")
                + " (extracted from the release's class)")
        rule: dict[str, Any] = {"other": {"consequence": "load-error", "error": "KeyError: '{ckpt}'", "note": note}}
        if bias:
            rule["ignored_suffixes"] = [".bias"]
            rule["ignored_classes"] = ["other"]
        return rule
    note = (f"{cls}.load_weights skips a name no stacked or expert row matched when it has no parameter, "
            "without a warning (extracted from the release's class)")
    return {"other": {"consequence": "silent-corruption", "error": None, "note": note}}
