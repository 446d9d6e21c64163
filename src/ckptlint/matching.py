"""Skip-list matchers: how a framework compares an ignore/exclude entry with a module prefix.

Each mode transcribes one upstream matching primitive (cited in the target data that uses it).
Entries are compiled once per list; matching a module is then one pass over the compiled list.
Patterns the config supplies (``re:`` entries, ModelOpt globs) run through ckptlint.userregex,
which bounds their time.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ckptlint.userregex import compile_user

Predicate = Callable[[str], bool]


def glob_regex(entry: str) -> str:
    # ModelOpt: escape dots, '*' becomes '.*'; other regex metacharacters pass through.
    return entry.replace(".", r"\.").replace("*", ".*")


def _regex_pred(entry: str) -> Predicate | None:
    # `re:` entries: re.match, anchored at the start only (compressed-tensors / Quark convention),
    # bounded (ckptlint.userregex).
    rx = compile_user(entry[3:])
    return rx.match if rx is not None else None


def _compile_one(mode: str, entry: str) -> Predicate | None:
    if mode == "exact":
        return entry.__eq__
    if mode == "exact_or_regex":
        return _regex_pred(entry) if entry.startswith("re:") else entry.__eq__
    if mode == "substring":
        return lambda name: entry in name
    if mode == "substring_ci":
        low = entry.lower()
        return lambda name: low in name.lower()
    if mode == "regex_or_substring_ci":
        # `re:` entries are regexes only (re.match); other entries a case-insensitive substring.
        if entry.startswith("re:"):
            return _regex_pred(entry)
        low = entry.lower()
        return lambda name: low in name.lower()
    if mode == "suffix":
        if entry.startswith("re:"):
            return _regex_pred(entry)
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
        glob = compile_user(glob_regex(entry), full=True)
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
        glob = compile_user(glob_regex(entry), full=True)
        return glob.match if glob is not None else None
    if mode == "glob_full":
        # vLLM 0.11 NVFP4: an entry holding `*` or `.` is a ModelOpt glob fullmatch'ed against the whole
        # name; any other entry is left to the exact test before it.
        if "*" not in entry and "." not in entry:
            return lambda name: False
        glob = compile_user(glob_regex(entry), full=True)
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
        rx = compile_user(entry[2:] if entry[:2] in ("-:", "+:") else entry)
        return rx.match if rx is not None else None
    raise ValueError(f"unknown match mode {mode!r}")


def keeps_mode(mode: str) -> bool:
    """Does ``mode`` have rules that keep a module (first-match lists with positive rules)?"""
    return mode == "gptq_dynamic"


def keeps(mode: str, entry: str) -> bool:
    """Is ``entry`` a rule that, matching first, keeps the module quantized (stops the search)?"""
    return mode == "gptq_dynamic" and not entry.startswith("-:")


@dataclass
class CompiledList:
    mode: str
    entries: list[str]
    preds: list[Predicate | None]

    def first_rule(self, name: str) -> str | None:
        """The first entry that matches ``name`` (a keeping rule included), or None."""
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


def compile_list(mode: str, entries: Iterable[str]) -> CompiledList:
    items = [e for e in entries if isinstance(e, str)]
    return CompiledList(mode, items, [_compile_one(mode, e) for e in items])
