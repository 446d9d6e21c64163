"""Name mappers: one type for every renaming the target data describes.

Target data writes a mapper as a list of :class:`~ckptlint.targets.schema.NameRule` (kinds ``regex``,
``prefix``, ``suffix``, ``substring``; the first rule that matches applies, ``count`` occurrences).
:class:`NameMapper` is such a list compiled, and mappers compose into one that applies each in turn
(``a.then(b)``), the way a framework's lists go through the model's mapper and then through a second
one. :class:`Renames` holds the mappers of one architecture on one release, composed once per plan
(``Plan.renames``) and read by every stage and rule that needs a name:

* ``modules``: the model class's name mapper (``Architecture.rename``) on main-model checkpoint modules;
* ``entries``: the same mapper on the quant config's lists (include lists, inferred lists), which
  leaves ``re:`` and glob entries as they are (a mapper rewrites plain names, vLLM #28072);
* ``skip_list``: ``entries`` then ``Architecture.skiplist_rename`` (methods with ``apply_mapper``);
* ``quant_prefix``: a main-model runtime module to the quant-config prefix its class builds it with
  (``Architecture.quant_rename``);
* ``draft_modules``: the draft's checkpoint modules to the names its loader uses (``Draft.rename``,
  ``{mtp}`` the first MTP layer), also the copies of ``Draft.exclude_copy``;
* ``draft_skip_list``: the draft class's mapper of the skip list (``Draft.skiplist_rename``), on every
  entry's text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# (compiled rules, plain_only): a stage applies its first matching rule; a plain-only stage leaves
# `re:` and glob entries alone
Stage = tuple[tuple[tuple[re.Pattern[str], str, int], ...], bool]


def fmt_mtp(template: str, mapping: dict[str, Any]) -> str:
    return template.replace("{mtp}", str(mapping["mtp"])) if "{mtp}" in template else template


class NameMapper:
    """Ordered stages of compiled rules: each stage applies the first of its rules whose pattern is
    found in the name (``count`` occurrences; 0: every one), then the next stage sees the result."""

    __slots__ = ("stages", "key")

    def __init__(self, stages: tuple[Stage, ...] = (), key: tuple = ()) -> None:
        self.stages = tuple(s for s in stages if s[0])
        self.key = key  # the rules as data (a cache key: equal keys, the same mapping)

    def __bool__(self) -> bool:
        return bool(self.stages)

    def __call__(self, name: str) -> str:
        for rules, plain_only in self.stages:
            if plain_only and (name.startswith("re:") or "*" in name):
                continue
            for rx, to, count in rules:
                if rx.search(name):
                    name = rx.sub(to, name, count=count)
                    break
        return name

    def then(self, other: NameMapper) -> NameMapper:
        """This mapper, then ``other`` on its result."""
        return NameMapper(self.stages + other.stages, self.key + other.key)


def _regex(kind: str, pattern: str) -> str:
    if kind == "regex":
        return pattern
    esc = re.escape(pattern)
    return "^" + esc if kind == "prefix" else esc + "$" if kind == "suffix" else esc


@lru_cache(maxsize=512)
def _compiled(rules: tuple[tuple[str, str, str, int], ...], mtp: int | None, plain_only: bool) -> NameMapper:
    out = []
    for kind, pattern, to, count in rules:
        if mtp is not None:
            pattern = fmt_mtp(pattern, {"mtp": mtp})
        # a literal kind's replacement is literal text
        out.append((re.compile(_regex(kind, pattern)), to if kind == "regex" else to.replace("\\", "\\\\"), count))
    return NameMapper(((tuple(out), plain_only),), ((rules, mtp, plain_only),))


def name_mapper(rules: Any, mtp: int | None = None, plain_only: bool = False) -> NameMapper:
    """The mapper of a list of ``NameRule`` records (validated or compiled data); ``mtp``: the MTP layer
    index ``{mtp}`` stands for; ``plain_only``: leave ``re:`` and glob entries as they are. Compiled
    once per distinct list (by value)."""
    if not rules:
        return _EMPTY
    return _compiled(tuple((r.kind, r.pattern, r.to, r.count) for r in rules), mtp, plain_only)


_EMPTY = NameMapper()


class Renames:
    """The name mappers of one architecture (and its draft, when speculative decoding is on) on one
    release; see the module docs."""

    __slots__ = ("modules", "entries", "skip_list", "quant_prefix", "draft_modules", "draft_skip_list")

    def __init__(self, arch: Any, draft: Any = None, mtp: int | None = None) -> None:
        self.modules = name_mapper(arch.rename)
        self.entries = name_mapper(arch.rename, plain_only=True)
        self.skip_list = self.entries.then(name_mapper(arch.skiplist_rename, plain_only=True))
        self.quant_prefix = name_mapper(arch.quant_rename)
        self.draft_modules = name_mapper(draft.rename, mtp) if draft is not None else _EMPTY
        self.draft_skip_list = name_mapper(draft.skiplist_rename, mtp) if draft is not None else _EMPTY

    def quant_name(self, name: str, role: str = "main") -> str:
        """The name the quant config is asked about for the runtime module ``name``: its quant-config
        prefix where the class builds it with one that is not its attribute path (main-model modules
        only; a draft's naming is the draft data's), else ``name``."""
        return self.quant_prefix(name) if role == "main" and self.quant_prefix else name
