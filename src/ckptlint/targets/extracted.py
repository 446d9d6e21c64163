"""Release knowledge extracted from each framework release's wheel (generated data, read lazily).

``targets/extracted/<framework>/<version>/registry.json`` is written by
``scripts/conformance.py extract FW VER`` (conformance/knowledge/registry.py, by AST from the
release's own sources; never edited by hand) and stamped with the wheel's sha256, the extractor's
version and a content digest (tests/test_extracted_data.py checks them). It holds:

* the model registry: every registered architecture name -> the module and class the release loads
  for it, and whether that class is a draft (MTP / NextN / Eagle / ... or vLLM's speculative table);
  the release's refusal texts for an architecture it does not register;
* the quantization-method registry: every method name the release accepts (per platform where that
  differs), the deprecated ones, the names that a registered config's override rewrites to a
  registered method, and the refusal texts.

Nothing is read until a check needs it (an architecture or a method that the hand-written target data
does not name): ``knowledge(fw, ver)`` decodes one file once and caches it.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, NamedTuple

from ckptlint.targets import extracted_classes, parse_version

_HERE = os.path.dirname(os.path.abspath(__file__))
EXTRACTED_DIR = os.path.join(_HERE, "extracted")

# (file-name stem of the generated files; another extractor adds its own, e.g. "classes")
REGISTRY = "registry"


class ArchEntry(NamedTuple):
    module: str  # the module the release imports, e.g. "vllm.model_executor.models.llama"
    cls: str  # the class it loads from it
    is_draft: bool  # an MTP / NextN / Eagle / DFlash / ... draft class
    table: str | None = None  # vLLM: which registry table ("text_generation", ...); SGLang: "entry_class"


class MethodEntry(NamedTuple):
    name: str
    platforms: tuple[str, ...] | None  # None: registered on every platform; else only on these
    deprecated: bool = False


# (a release whose refusal text the extractor did not find: the error is still raised, its text unknown)
_NO_TEXT = {"text": "<the release's refusal; its text was not found in the wheel>", "fields": {}, "args": 1}


def _shorten(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(repr(x) for x in items[:limit])
    return shown + (f", ... {len(items) - limit} more" if len(items) > limit else "")


def _fill(msg: dict[str, Any], values: dict[str, str]) -> str:
    """A message template from the wheel with its replacement fields filled by role; with more
    than one exception argument Python prints the arguments as a tuple, and so does this."""
    text: str = msg["text"]
    out = text
    for field, role in msg.get("fields", {}).items():
        value = values.get(role, "...")
        out = out.replace("{" + field + "!r}", repr(value)).replace("{" + field + "}", value)
    out = out.replace("{{", "{").replace("}}", "}")
    if msg.get("args", 1) > 1:
        out = repr((out, values.get("name", "...")))
    return f"{msg.get('exception', 'ValueError')}: {out}"


class Knowledge:
    """One release's extracted registries (``knowledge(fw, ver)``)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc
        self.framework: str = doc["framework"]
        self.version: str = doc["version"]
        self.wheel: str = doc.get("wheel", "")
        self.wheel_sha256: str = doc.get("wheel_sha256", "")
        self.extractor: str = doc.get("extractor", "")
        self._archs: dict[str, ArchEntry] | None = None
        self._methods: dict[str, MethodEntry] | None = None

    # -- model registry
    @property
    def architectures(self) -> dict[str, ArchEntry]:
        if self._archs is None:
            self._archs = {k: ArchEntry(v["module"], v["class"], bool(v.get("draft")), v.get("table"))
                           for k, v in self._doc["architectures"].items()}
        return self._archs

    def registers(self, arch: str) -> bool:
        return arch in self._doc["architectures"]

    def dropped(self, archs: list[str]) -> str | None:
        """Why the release names one of ``archs`` as dropped (vLLM's previously-supported and
        out-of-tree tables), or None."""
        ref = self._doc.get("architecture_refusals", {})
        for a in archs:
            if a in ref.get("previously_supported", {}):
                return f"{a} was supported until v{ref['previously_supported'][a]}"
            if a in ref.get("out_of_tree", {}):
                return f"{a} moved to an out-of-tree plugin"
        return None

    def remote_code_class(self, config: dict[str, Any]) -> str | None:
        """The ``auto_map`` key of config.json that the release's Transformers-backend fallback
        takes as a remote-code model class when no listed architecture is registered (extracted:
        vLLM any key starting with ``AutoModel``, SGLang the key ``AutoModel`` itself), or None."""
        rule = self._doc.get("architecture_refusals", {}).get("remote_code")
        auto_map = config.get("auto_map")
        if not rule or not isinstance(auto_map, dict):
            return None
        key, exact = rule["key"], rule.get("match") == "exact"
        return next((n for n in auto_map if isinstance(n, str) and isinstance(auto_map[n], str)
                     and (n == key if exact else n.startswith(key))), None)

    @property
    def drafts(self) -> dict[str, ArchEntry]:
        return {k: v for k, v in self.architectures.items() if v.is_draft}

    def unknown_arch_message(self, arch: str | list[str]) -> str:
        """What the release prints at start-up when none of ``arch`` is registered (vLLM: its
        registry's text, or the 'supported until vX' / 'install the plugin' text for an
        architecture it dropped; SGLang: the Transformers fallback's text, since it tries the
        Transformers backend before its registry refuses)."""
        archs = [arch] if isinstance(arch, str) else list(arch)
        ref = self._doc.get("architecture_refusals", {})
        msgs = ref.get("messages", {})
        for a in archs:
            for table in ("previously_supported", "out_of_tree"):
                if a in ref.get(table, {}) and table in msgs:
                    value = str(ref[table][a])
                    return _fill(msgs[table], {"name": a, "version": value, "url": value})
        names = sorted(self._doc["architectures"])
        return _fill(msgs.get("unknown", _NO_TEXT), {"names": repr(archs), "name": archs[0] if archs else "",
                                                     "choices": f"dict_keys([{_shorten(names)}])"})

    # -- quantization-method registry
    @property
    def methods(self) -> dict[str, MethodEntry]:
        if self._methods is None:
            m = self._doc["methods"]
            on = m.get("registered_on", {})
            dep = set(m.get("deprecated", []))
            self._methods = {n: MethodEntry(n, tuple(on[n]) if n in on else None, n in dep) for n in m["names"]}
        return self._methods

    @property
    def override_names(self) -> frozenset[str]:
        """quant_method values a registered config's override rewrites to a registered method."""
        return frozenset(self._doc["methods"].get("override_names", ()))

    def method_refusal(self, name: str, platform: str = "cuda") -> str | None:
        """The release's start-up error for a checkpoint whose ``quant_method`` is ``name`` (as
        written, lower-cased) on ``platform`` ("cuda" | "rocm"), or None when the release accepts
        the name (registered, or rewritten by an override). Deprecated methods are refused as the
        release refuses them under its default flags."""
        m = self._doc["methods"]
        msgs = m.get("messages", {})
        entry = self.methods.get(name)
        if entry is None or (entry.platforms is not None and platform not in entry.platforms):
            if name in self.override_names:
                return None
            return self.unknown_method_message(name, platform)
        if entry.deprecated and "deprecated" in msgs:
            return _fill(msgs["deprecated"], {"name": name})
        rocm = (m.get("platforms", {}).get("rocm") or {})
        if platform == "rocm" and rocm.get("supported") is not None and name not in rocm["supported"] \
                and "platform" in msgs:
            return _fill(msgs["platform"], {"name": name, "device": rocm.get("device_name", "ROCm")})
        return None

    def unknown_method_message(self, name: str, platform: str = "cuda") -> str:
        names = [n for n, e in self.methods.items() if e.platforms is None or platform in e.platforms]
        return _fill(self._doc["methods"].get("messages", {}).get("unknown", _NO_TEXT),
                     {"name": name, "choices": f"[{_shorten(names)}]"})


@lru_cache(maxsize=None)
def knowledge(framework: str, version: str) -> Knowledge | None:
    """The extracted registries of ``framework==version``, or None when none were extracted."""
    path = os.path.join(EXTRACTED_DIR, framework, version, f"{REGISTRY}.json")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    import msgspec

    return Knowledge(msgspec.json.decode(data))


@lru_cache(maxsize=None)
def _registered_index() -> dict[str, tuple[tuple[str, str], ...]]:
    out: dict[str, list[tuple[str, str]]] = {}
    rel = sorted(extracted_releases(), key=lambda r: (r[0], parse_version(r[1])))
    for fw, v in rel:
        k = knowledge(fw, v)
        for a in k._doc["architectures"] if k is not None else ():
            out.setdefault(a, []).append((fw, v))
    return {a: tuple(r) for a, r in out.items()}


def registered_anywhere(arch: str) -> list[tuple[str, str]]:
    """(framework, version) of every extracted release that registers ``arch``, oldest first."""
    return list(_registered_index().get(arch, ()))


def extracted_releases(name: str = REGISTRY) -> list[tuple[str, str]]:
    """(framework, version) of every release with a generated ``<name>.json``."""
    out = []
    if os.path.isdir(EXTRACTED_DIR):
        for fw in sorted(os.listdir(EXTRACTED_DIR)):
            d = os.path.join(EXTRACTED_DIR, fw)
            if os.path.isdir(d):
                out += [(fw, v) for v in sorted(os.listdir(d)) if os.path.isfile(os.path.join(d, v, f"{name}.json"))]
    return out


def classes(framework: str, version: str) -> Any:
    """The release's per-class loading facts (``classes.json``; ``ckptlint.targets.extracted_classes``):
    a ``Classes`` view (``keys()``, ``facts(key)``, ``for_architecture(arch)``, ``stamp``), or None when
    none were extracted. Nothing is read until a fact is asked for."""
    return extracted_classes.Classes(framework, version) if extracted_classes.has_classes(framework, version) else None
