"""Skip-list matchers: how a framework compares an ignore/exclude entry with a module prefix.

Each mode transcribes one upstream matching primitive (cited in the target data that uses it).
Entries are compiled once per list; matching a module is then one pass over the compiled list.
Patterns the config supplies (``re:`` entries, ModelOpt globs) run through ckptlint.userregex,
which bounds their time: a list is compiled in the check's ``RegexScope`` (passed in), so that
every target of the check shares the patterns' budgets and outcomes.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ckptlint.userregex import RegexScope

Predicate = Callable[[str], bool]


def glob_regex(entry: str) -> str:
    # ModelOpt: escape dots, '*' becomes '.*'; other regex metacharacters pass through.
    return entry.replace(".", r"\.").replace("*", ".*")


def _regex_pred(entry: str, scope: RegexScope) -> Predicate | None:
    # `re:` entries: re.match, anchored at the start only (compressed-tensors / Quark convention),
    # bounded (ckptlint.userregex).
    rx = scope.compile(entry[3:])
    return rx.match if rx is not None else None


def _compile_one(mode: str, entry: str, scope: RegexScope) -> Predicate | None:
    if mode == "exact":
        return entry.__eq__
    if mode == "exact_or_regex":
        return _regex_pred(entry, scope) if entry.startswith("re:") else entry.__eq__
    if mode == "substring":
        return lambda name: entry in name
    if mode == "substring_ci":
        low = entry.lower()
        return lambda name: low in name.lower()
    if mode == "regex_or_substring_ci":
        # `re:` entries are regexes only (re.match); other entries a case-insensitive substring.
        if entry.startswith("re:"):
            return _regex_pred(entry, scope)
        low = entry.lower()
        return lambda name: low in name.lower()
    if mode == "suffix":
        if entry.startswith("re:"):
            return _regex_pred(entry, scope)
        dotted = "." + entry
        return lambda name: name == entry or name.endswith(dotted)
    if mode in ("dotted_path", "dotted_path_strip"):
        if mode == "dotted_path_strip":  # trailing dots dropped first (an entry `lm_head.` is `lm_head`)
            entry = entry.rstrip(".")
        start, inner = entry + ".", "." + entry + "."
        if mode == "dotted_path_strip":
            return lambda name: (lambda n: n == entry or n.startswith(start) or inner in "." + n + ".")(name.rstrip("."))
        return lambda name: name == entry or name.startswith(start) or inner in "." + name + "."
    if mode == "glob_component":
        glob = scope.compile(glob_regex(entry), full=True)
        if glob is None:
            return None
        full = glob.match

        def pred(name: str) -> bool:
            if full(name):
                return True
            if name.startswith("language_model.") and full(name[len("language_model."):]):
                return True
            return any(full(part) for part in name.split("."))

        return pred
    if mode == "substring_or_fnmatch":
        rx = re.compile(fnmatch.translate(entry))

        def either(name: str) -> bool:
            if entry in name or rx.match(name) is not None:
                return True
            return name.startswith("language_model.") and entry in name[len("language_model."):]

        return either
    if mode == "glob_whole":
        # SGLang 0.5.5 NVFP4 is_layer_excluded: every entry as a ModelOpt glob, fullmatch of the whole prefix.
        glob = scope.compile(glob_regex(entry), full=True)
        return glob.match if glob is not None else None
    if mode == "glob_full":
        # vLLM 0.11 NVFP4: an entry holding `*` or `.` is a ModelOpt glob fullmatch'ed against the whole
        # name; any other entry is left to the exact test before it.
        if "*" not in entry and "." not in entry:
            return lambda name: False
        glob = scope.compile(glob_regex(entry), full=True)
        return glob.match if glob is not None else None
    if mode == "substring_proper":
        # A substring other than the whole name (`entry != name and entry in name`), or of the name without
        # its `language_model.` prefix: an entry equal to the name is left to the exact test before it.
        lm = "language_model."
        return lambda name: entry != name and (entry in name or (name.startswith(lm) and entry in name[len(lm):]))
    if mode == "fnmatch":
        rx = re.compile(fnmatch.translate(entry))
        return lambda name: rx.match(name) is not None
    if mode == "gptq_dynamic":
        # GPTQModel `dynamic` keys: `-:<regex>` (excludes) or `+:<regex>` / `<regex>` (a per-module
        # override that keeps the module quantized), each re.match'ed; the first rule that matches decides.
        rx = scope.compile(entry[2:] if entry[:2] in ("-:", "+:") else entry)
        return rx.match if rx is not None else None
    raise ValueError(f"unknown match mode {mode!r}")


def keeps_mode(mode: str) -> bool:
    """Does ``mode`` have rules that keep a module (first-match lists with positive rules)?"""
    return mode == "gptq_dynamic"


def keeps(mode: str, entry: str) -> bool:
    """Is ``entry`` a rule that, matching first, keeps the module quantized (stops the search)?"""
    return mode == "gptq_dynamic" and not entry.startswith("-:")


# Modes whose literal entries are found by the name's components (see _Keyed): an entry matches
# exactly when its components are a run of the name's components of the kind the mode asks for. `re:` entries
# of these modes (and every entry of the other modes) are tried in written order as before.
_KEYED = frozenset({"exact", "exact_or_regex", "suffix", "dotted_path", "dotted_path_strip"})
# Below this many literal entries a scan of the predicates is as fast as the automaton.
_MIN_KEYED = {"exact": 1, "exact_or_regex": 1, "suffix": 8, "dotted_path": 16, "dotted_path_strip": 16}


# What makes a ModelOpt glob more than its literal text (glob_regex passes regex syntax through).
_GLOB_SYNTAX = re.compile(r"[*\\\[\](){}?+^$|]")


def _literal(mode: str, entry: str) -> bool:
    """Whether ``entry`` of a keyed mode is matched by its key (not a `re:` regex)."""
    return not (mode in ("exact_or_regex", "suffix") and entry.startswith("re:"))


def _key(mode: str, entry: str) -> str:
    return entry.rstrip(".") if mode == "dotted_path_strip" else entry


class _Keyed:
    """The literal entries of a keyed mode, found for a name in one pass over its components.

    Every keyed predicate above, read backwards, asks whether an entry's dot-separated components
    are a run of the name's components: the whole name (exact), a run that ends the name (suffix:
    ``name == e or name.endswith("." + e)``), or any run (dotted path: ``e`` equal to the name, a
    leading run followed by a dot, or a run between dots; ``"." + e + "."`` in ``"." + name + "."``).
    Rather than spelling out every such run of the name (O(K^2) strings of O(K) characters for a name
    of K components: gigabytes for one hostile name of a few thousand components), the entries are
    put in an automaton over components (Aho-Corasick, with component strings as letters), and a
    name costs one step per component and no strings beyond its parts. ``best[s]`` is the first
    (lowest) entry position among the entries that end at state ``s`` or at any state on its failure
    chain, so the scan only takes a minimum."""

    __slots__ = ("mode", "exact", "goto", "fail", "best", "end")

    def __init__(self, mode: str, first: dict[str, int]) -> None:
        self.mode = mode
        self.exact = first if mode in ("exact", "exact_or_regex") else None
        if self.exact is not None:
            return
        none = 1 << 62
        goto: list[dict[str, int]] = [{}]
        own: list[int] = [none]
        for key, i in first.items():
            parts = key.split(".")
            if mode == "suffix":
                parts.reverse()  # a suffix of the name is a prefix of its reversed components
            s = 0
            for part in parts:
                nxt = goto[s].get(part)
                if nxt is None:
                    nxt = goto[s][part] = len(goto)
                    goto.append({})
                    own.append(none)
                s = nxt
            own[s] = min(own[s], i)
        self.goto, self.end = goto, none
        if mode == "suffix":  # a walk from the name's end along one path: no failure links needed
            self.fail, self.best = [], own
            return
        fail = [0] * len(goto)
        best = own[:]
        queue = list(goto[0].values())
        for s in queue:  # breadth first: a state's failure target is settled before the state
            for part, t in goto[s].items():
                f = fail[s]
                while f and part not in goto[f]:
                    f = fail[f]
                g = goto[f].get(part, 0)
                fail[t] = g if g != t else 0
                best[t] = min(best[t], best[fail[t]])
                queue.append(t)
        self.fail, self.best = fail, best

    def first(self, name: str) -> int | None:
        """The lowest position of a literal entry that matches ``name``, or None."""
        if self.exact is not None:
            return self.exact.get(name)
        goto, best, end = self.goto, self.best, self.end
        if self.mode == "suffix":
            s, low = 0, end
            for part in reversed(name.split(".")):
                s = goto[s].get(part, -1)
                if s < 0:
                    break
                low = min(low, best[s])
            return None if low == end else low
        if self.mode == "dotted_path_strip":
            name = name.rstrip(".")
        fail = self.fail
        s, low = 0, end
        for part in name.split("."):
            while s and part not in goto[s]:
                s = fail[s]
            s = goto[s].get(part, 0)
            if best[s] < low:
                low = best[s]
        return None if low == end else low


@dataclass
class CompiledList:
    mode: str
    entries: list[str]
    preds: list[Predicate | None]

    def __post_init__(self) -> None:
        # Long lists (Quark/compressed-tensors exclude lists of hundreds of module names) of a keyed
        # mode: the first literal entry per key, and the others (`re:` entries) with their positions.
        self._first: _Keyed | None = None
        self._components: dict[str, int] | None = None
        self._others: list[tuple[int, Predicate | None]] = []
        mode = self.mode
        if mode == "glob_component":
            self._component_index()
            return
        if mode not in _KEYED:
            return
        literal = [_literal(mode, e) for e in self.entries]
        if sum(literal) >= _MIN_KEYED[mode]:
            first: dict[str, int] = {}
            for i, (e, lit) in enumerate(zip(self.entries, literal)):
                if lit:
                    first.setdefault(_key(mode, e), i)
                else:
                    self._others.append((i, self.preds[i]))
            self._first = _Keyed(mode, first)

    def _component_index(self) -> None:
        """ModelOpt globs without a wildcard or other regex syntax (the module names exporters write)
        fullmatch a text exactly when they equal it: such entries are found by the name, the name
        without ``language_model.`` and its components, looked up once each; the entries with a
        wildcard are still tried in written order. (A name of K components then costs O(K) lookups
        plus the wildcard entries, not O(entries x K) regex calls.)"""
        literal = [not _GLOB_SYNTAX.search(e) for e in self.entries]
        if sum(literal) < _MIN_KEYED["dotted_path"]:
            return
        first: dict[str, int] = {}
        for i, (e, lit) in enumerate(zip(self.entries, literal)):
            if lit:
                first.setdefault(e, i)
            else:
                self._others.append((i, self.preds[i]))
        self._components = first

    def _first_component(self, name: str) -> int | None:
        get = self._components.get
        cands = [name, *name.split(".")]
        if name.startswith("language_model."):
            cands.append(name[len("language_model."):])
        return min((i for i in map(get, cands) if i is not None), default=None)

    def first_rule(self, name: str) -> str | None:
        """The first entry that matches ``name`` (a keeping rule included), or None."""
        first = self._first
        if first is not None or self._components is not None:
            hit = first.first(name) if first is not None else self._first_component(name)
            best = len(self.entries) if hit is None else hit
            for i, pred in self._others:
                if i > best:
                    break
                if pred is not None and pred(name):
                    return self.entries[i]
            return self.entries[best] if best < len(self.entries) else None
        for entry, pred in zip(self.entries, self.preds):
            if pred is not None and pred(name):
                return entry
        return None

    def first_match(self, name: str) -> str | None:
        """The entry that excludes ``name``: the first that matches, unless that one keeps it."""
        hit = self.first_rule(name)
        return None if hit is None or keeps(self.mode, hit) else hit

    def invalid(self) -> list[str]:
        return [e for e, p in zip(self.entries, self.preds) if p is None]


def compile_list(mode: str, entries: Iterable[str], regexes: RegexScope | None = None) -> CompiledList:
    """The entries compiled for ``mode``; their config regexes in ``regexes`` (the check's scope;
    None: a scope of the list's own)."""
    items = [e for e in entries if isinstance(e, str)]
    scope = regexes if regexes is not None else RegexScope()
    return CompiledList(mode, items, [_compile_one(mode, e, scope) for e in items])
