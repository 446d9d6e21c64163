"""Model classes simulated from the facts extracted from a release's wheel (``extracted/<fw>/<ver>/classes.json``).

The generated files (``python scripts/conformance.py extract FW VER --only classes``; extractor in the
repository's ``conformance/knowledge/classes.py``, stamped like ``registry.json``) hold, per ``"module:Class"``, what the class declares about loading:
its ``packed_modules_mapping`` (and what ``__init__`` adds), the literal stacked / expert tables of its
``load_weights``, its ``WeightsMapper`` rules and every sub-layer with the quant config it is built with.

An architecture the release registers but the hand-written target data does not describe is simulated
from an :class:`Architecture` built in layers, each field taking the first source that has it:

1. hand data: the fields the target's TOML entry for the architecture writes (a placeholder entry,
   ``generic = true``, writes none but ``supported``);
2. extracted: the class's facts, translated by :mod:`ckptlint.targets.class_facts` (``FACTS``);
3. generic: the ``"*"`` architecture of the target data, for whatever remains (loader strictness, name
   classes, norms) -- reported, never silent.

:func:`provenance` says which layer each field came from (``ckptlint plan`` and the TG605 finding name them).
Files are read lazily, only for an architecture the check needs, and decoded one class at a time.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

import msgspec

from ckptlint._ns import plain, wrap
from ckptlint.fsutil import read_package_file
from ckptlint.targets.class_facts import FACTS, extracted_fields, unexpected_rule

_HERE = os.path.dirname(os.path.abspath(__file__))
EXTRACTED_DIR = os.path.join(_HERE, "extracted")
CLASSES = "classes.json"


class _Doc(msgspec.Struct):
    classes: dict[str, msgspec.Raw]
    aliases: dict[str, str] = {}
    draft_overrides: dict[str, list[str]] = {}
    framework: str = ""
    version: str = ""
    wheel_sha256: str | None = None
    extractor: str = ""


def classes_file(framework: str, version: str) -> str:
    return os.path.join(EXTRACTED_DIR, framework, version, CLASSES)


@lru_cache(maxsize=None)
def _doc(framework: str, version: str) -> _Doc | None:
    try:
        return msgspec.json.decode(read_package_file(classes_file(framework, version)), type=_Doc)
    except (OSError, ValueError):
        return None


def has_classes(framework: str, version: str) -> bool:
    return os.path.isfile(classes_file(framework, version))


def stamp(framework: str, version: str) -> dict[str, Any] | None:
    """The file's stamp: wheel sha256 and extractor version (None: no file)."""
    d = _doc(framework, version)
    return None if d is None else {"wheel_sha256": d.wheel_sha256, "extractor": d.extractor}


def class_keys(framework: str, version: str) -> list[str]:
    d = _doc(framework, version)
    return sorted(d.classes) if d is not None else []


@lru_cache(maxsize=None)
def class_facts(framework: str, version: str, key: str) -> dict[str, Any] | None:
    """The extracted facts of ``"module:Class"`` on that release (None: not extracted)."""
    d = _doc(framework, version)
    if d is None or key not in d.classes:
        return None
    return msgspec.json.decode(d.classes[key])


def class_for(framework: str, version: str, arch: str) -> str | None:
    """``"module:Class"`` that serves ``arch`` on the release: the one its model registry names
    (registry.json, ``ckptlint.targets.extracted``), through a package's re-export where the registry
    names the package; None when the release does not register ``arch`` or its class was not extracted."""
    from ckptlint.targets.extracted import knowledge

    k = knowledge(framework, version)
    entry = k.architectures.get(arch) if k is not None else None
    d = _doc(framework, version)
    if entry is None or d is None:
        return None
    key = f"{entry.module}:{entry.cls}"
    if key not in d.classes:
        key = d.aliases.get(key, key)
    return key if key in d.classes else None


class Classes:
    """One release's classes.json (``ckptlint.targets.extracted.classes(fw, ver)``), read on first use."""

    def __init__(self, framework: str, version: str) -> None:
        self.framework, self.version = framework, version

    def keys(self) -> list[str]:
        return class_keys(self.framework, self.version)

    def facts(self, key: str) -> dict[str, Any] | None:
        return class_facts(self.framework, self.version, key)

    def for_architecture(self, arch: str) -> str | None:
        """The ``"module:Class"`` the release registers for ``arch`` (None: not registered or not extracted)."""
        return class_for(self.framework, self.version, arch)

    @property
    def stamp(self) -> dict[str, Any] | None:
        return stamp(self.framework, self.version)


# --- layering -------------------------------------------------------------------------------------

def _plain(obj: Any) -> dict[str, Any]:
    return obj.model_dump(by_alias=True) if hasattr(obj, "model_dump") else dict(obj)


def hand_fields(target: Any, arch: str) -> dict[str, Any]:
    """The fields the target data writes for ``arch`` beyond the generic ``"*"`` architecture it is
    ``like`` (a field written with the generic value is the same either way)."""
    entry = target.architecture(arch)
    generic = target.architecture("*")
    if entry is None or generic is None:
        return {}
    e, g = _plain(entry), _plain(generic)
    return {k: v for k, v in e.items() if k not in ("like", "generic", "supported", "error") and v != g.get(k)}


class ExtractedModel:
    """An architecture built from extracted facts, with where each field came from."""

    def __init__(self, arch: Any, key: str, provenance: dict[str, str], notes: list[str], stamp: dict[str, Any] | None):
        self.arch = arch  # Architecture (validated) or its wrapped dict (compiled data)
        self.key = key  # "module:Class"
        self.provenance = provenance  # field -> "hand" | "extracted" | "generic"
        self.notes = notes
        self.stamp = stamp

    @property
    def extracted(self) -> list[str]:
        return [f for f in FACTS if self.provenance.get(f) == "extracted"]


def extracted_model(target: Any, arch_name: str) -> ExtractedModel | None:
    """The architecture ``arch_name`` on ``target`` simulated from its class's extracted facts, layered as
    the module docs say; None when the release's files have no class for it."""
    fw, ver = target.framework, target.version
    if not has_classes(fw, ver):
        return None
    key = class_for(fw, ver, arch_name)
    facts = class_facts(fw, ver, key) if key else None
    if facts is None:
        return None
    generic = target.architecture("*")
    if generic is None:
        return None
    fields, notes = extracted_fields(facts, fw)
    absent = fields.pop("absent_experts", None)
    if absent is not None:
        fields["absent"] = [_absent_rule(target, generic, absent, key)]
    guard = fields.pop("unexpected_other", None)
    if guard is not None:
        if getattr(generic, "unexpected", None) is None:
            from ckptlint.targets.schema import UnexpectedNames

            # (every field written out: compiled data wraps the record as it is)
            fields["unexpected"] = UnexpectedNames.model_validate(unexpected_rule(guard, key)).model_dump()
        else:  # (the generic rule has name classes of its own: not layered, said so)
            notes.append("what load_weights does with a name it has no parameter for (the generic rule has its own)")
    merged = _plain(generic)
    provenance = {k: "generic" for k in merged if k not in ("like", "supported", "generic", "error")}
    for k, v in fields.items():
        merged[k] = v
        provenance[k] = "extracted"
    if "kinds" in fields:  # the class's own sub-layers first, the generic patterns for the rest
        merged["kinds"] = fields["kinds"] + list(_plain_list(_plain(generic).get("kinds") or []))
    for k, v in hand_fields(target, arch_name).items():
        merged[k] = v
        provenance[k] = "hand"
    merged["generic"] = False
    merged.pop("like", None)
    arch = _build(target, merged)
    return ExtractedModel(arch, key, provenance, notes, stamp(fw, ver))


def _absent_rule(target: Any, generic: Any, absent: tuple[str, list[str], list[str]], key: str) -> dict[str, Any]:
    """The absent-module rule for expert names under blocks the class does not build; what loading them
    does is the generic loader rule's (the extractor does not model the loader's branches)."""
    rx, blocks, moe_paths = absent
    own = generic.unexpected_param  # the generic model loader's own text (vLLM: AutoWeightsLoader)
    o = own or target.data.loading.unexpected_param
    err = o.error if own is not None else None
    if err is not None:
        err = err.replace("{name}", "{ckpt}").replace("{inner}", "{ckpt}")
        if re.search(r"\{(?!ckpt\})[a-z]+\}", err):
            err = None
    blocks_txt = " / ".join(f"`{b}`" for b in blocks)
    own_txt = ", ".join(f"`{p}`" for p in moe_paths)
    note = (f"{key.rpartition(':')[2]} builds no {blocks_txt} block in its decoder layers, its experts are {own_txt} "
            f"(extracted from the release's class), so it has no parameter for these expert tensors; what its loader "
            f"does with them follows the generic rule")
    return {"pattern": rx, "outcome": {"consequence": o.consequence, "error": err, "note": note}}


def _plain_list(items: list[Any]) -> list[Any]:
    return [dict(x) if isinstance(x, dict) else _plain(x) for x in items]


def _build(target: Any, merged: dict[str, Any]) -> Any:
    if isinstance(target.data, dict):  # compiled data: records are wrapped dicts, every field written out
        return wrap(plain(merged))
    from ckptlint.targets.schema import Architecture

    return Architecture.model_validate(plain(merged))
