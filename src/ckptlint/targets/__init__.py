"""Framework targets: versioned data files, resolution of a requested version, inheritance."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import msgspec

from ckptlint._ns import wrap
from ckptlint.findings import mention
from ckptlint.fsutil import read_package_file

if TYPE_CHECKING:
    from ckptlint.targets.schema import Architecture, TargetData

COMPILED = "compiled.json"

FRAMEWORKS = ("sglang", "vllm")
_VERSION_RE = re.compile(r"^(\d+(?:\.\d+)*)(?:\.?(?:post|dev|rc|a|b)\d*)?(?:\+.*)?$")


class TargetError(ValueError):
    """A target the user asked for that cannot be resolved (usage error, exit 2)."""


def parse_version(text: str) -> tuple[int, ...]:
    m = _VERSION_RE.match(text.strip())
    if not m:
        raise TargetError(f"invalid version {text!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


# Tables that a later file replaces whole instead of merging key by key (mappings whose keys are
# data, and outcomes whose fields belong together).
_REPLACE_WHOLE = frozenset({
    "packed_extra", "packed_modules_mapping", "fallback_fused", "all_listed", "add_if_contains", "missing_shard",
    "unexpected_param", "mixed_shards", "missing_weights", "whole_draft_check", "exclude_copy",
    "only_methods_for_count", "quant_none_if_entry", "rejected_in", "stacked", "expert", "other", "by_suffix", "fused", "aliases",
})


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k not in _REPLACE_WHOLE:
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


# (os.path, not pathlib: pathlib and what it imports cost a check ~7 ms)
_HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(_HERE, "data")


def _data_dir(framework: str) -> str:
    return os.path.join(DATA_DIR, framework)


@lru_cache(maxsize=None)
def raw_files(framework: str) -> dict[str, dict[str, Any]]:
    """version string -> raw TOML of that file (not merged)."""
    import tomllib

    out: dict[str, dict[str, Any]] = {}
    d = _data_dir(framework)
    if not os.path.isdir(d):
        return out
    for name in os.listdir(d):
        if name.endswith(".toml"):
            with open(os.path.join(d, name), encoding="utf-8") as fh:
                out[name[: -len(".toml")]] = tomllib.loads(fh.read())
    return out


def _toml_files() -> list[tuple[str, bytes]]:
    out = []
    for fw in FRAMEWORKS:
        d = _data_dir(fw)
        if os.path.isdir(d):
            out += [(f"{fw}/{name}", read_package_file(os.path.join(d, name))) for name in os.listdir(d)
                    if name.endswith(".toml")]
    return sorted(out)


def data_digest() -> str:
    """CRC-32 and length of every target data file and the schema (defaults are filled in when
    compiling): the compiled form is used only while it matches. A change detector, not a security
    check, so zlib's CRC rather than hashlib (loading OpenSSL costs every command ~10 ms)."""
    import zlib

    crc = size = 0
    for name, data in _toml_files() + [("schema.py", read_package_file(os.path.join(_HERE, "schema.py")))]:
        part = name.encode() + b"\0" + data + b"\0"
        crc = zlib.crc32(part, crc)
        size += len(part)
    return f"crc32:{crc:08x}:{size}"


class _Compiled(msgspec.Struct):
    """compiled.json with each target's data left undecoded (``msgspec.Raw``) until it is asked
    for: a check needs two of the releases, and decoding all of them cost ~6 ms."""

    digest: str
    versions: dict[str, list[str]]
    targets: dict[str, msgspec.Raw]


@lru_cache(maxsize=None)
def _compiled() -> _Compiled | None:
    """The validated, merged target data (``python -m ckptlint.targets.compile``), if current."""
    try:
        doc = msgspec.json.decode(read_package_file(os.path.join(DATA_DIR, COMPILED)), type=_Compiled)
    except (OSError, ValueError):  # (msgspec.DecodeError and ValidationError are ValueErrors)
        return None
    return doc if doc.digest == data_digest() else None


@lru_cache(maxsize=None)
def known_versions(framework: str) -> tuple[str, ...]:
    compiled = _compiled()
    if compiled is not None:
        return tuple(compiled.versions.get(framework, ()))
    return tuple(sorted(raw_files(framework), key=parse_version))


@lru_cache(maxsize=None)
def _merged(framework: str, version: str) -> dict[str, Any]:
    raw = raw_files(framework)[version]
    parent = raw.get("extends")
    if parent is None:
        return raw
    if parent not in raw_files(framework):
        raise TargetError(f"{framework} {version} extends unknown {parent}")
    base = dict(_merged(framework, parent))
    base.pop("extends", None)
    base["sources"] = []  # each file cites its own sources
    return _deep_merge(base, raw)


@lru_cache(maxsize=None)
def load_target_data(framework: str, version: str) -> "TargetData":
    compiled = _compiled()
    if compiled is not None:
        return wrap(msgspec.json.decode(compiled.targets[f"{framework}=={version}"]))
    return validate_target_data(framework, version)


def validate_target_data(framework: str, version: str) -> "TargetData":
    """Strict validation of one merged data file (tests, the compiler, and stale compiled data)."""
    from ckptlint.targets.schema import TargetData

    return TargetData.model_validate(_merged(framework, version))


@dataclass
class Target:
    data: TargetData
    requested: str  # canonical requested form, e.g. "sglang==0.5.17"
    note: str | None = None  # resolution note (not verified exactly / newer than known)
    note_level: str | None = None  # "info" | "warning"
    _arch_cache: dict[str, Architecture | None] = field(default_factory=dict, repr=False)

    @property
    def framework(self) -> str:
        return self.data.framework

    @property
    def version(self) -> str:
        return self.data.version

    @property
    def resolved(self) -> str:
        return f"{self.data.framework}=={self.data.version}"

    @property
    def id(self) -> str:
        return self.requested

    def __reduce_ex__(self, protocol):  # type: ignore[override]
        # A release of the shipped data crosses to a worker process (``check`` over several checkpoints)
        # as its name and resolution: the worker takes the same data from its own (cached) load, rather
        # than unpickling a copy of it per checkpoint. Other data (tests' own) pickles as it is.
        try:
            shipped = load_target_data(self.framework, self.version) is self.data
        except Exception:  # noqa: BLE001 - not a release of the shipped data
            shipped = False
        if shipped:
            return (_shipped_target, (self.framework, self.version, self.requested, self.note, self.note_level))
        return object.__reduce_ex__(self, protocol)

    def architecture(self, name: str) -> "Architecture | None":
        if name not in self._arch_cache:
            if isinstance(self.data, dict):  # compiled: inheritance already resolved
                self._arch_cache[name] = self.data["architectures"].get(name)
            else:
                self._arch_cache[name] = resolve_arch(self.data, name, ())
        return self._arch_cache[name]


def _shipped_target(framework: str, version: str, requested: str, note: str | None,
                    note_level: str | None) -> Target:
    return Target(load_target_data(framework, version), requested, note, note_level)


def resolve_arch(data: "TargetData", name: str, seen: tuple[str, ...] = ()) -> "Architecture | None":
    from ckptlint.targets.schema import Architecture

    arch = data.architectures.get(name)
    if arch is None or arch.like is None:
        return arch
    if arch.like in seen:
        raise TargetError(f"architecture inheritance cycle at {name}")
    base = resolve_arch(data, arch.like, seen + (name,))
    if base is None:
        raise TargetError(f"{name} is like unknown architecture {arch.like}")
    merged = _deep_merge(base.model_dump(by_alias=True, exclude_unset=True),
                         arch.model_dump(by_alias=True, exclude_unset=True))
    merged.pop("like", None)
    return Architecture.model_validate(merged)


def list_targets() -> list[Target]:
    return [Target(load_target_data(fw, v), f"{fw}=={v}") for fw in FRAMEWORKS for v in known_versions(fw)]


def resolve(spec: str) -> list[Target]:
    """Resolve a ``--target`` value.

    ``sglang==0.5.15`` (also ``sglang@0.5.15``, ``sglang=0.5.15``): that release, or the newest
    verified release not newer than it (with an info note), or the newest with a warning when it
    is newer than every verified release. ``sglang`` alone: every verified release.
    """
    text = spec.strip()
    m = re.match(r"^([A-Za-z_-]+)\s*(?:(==|=|@)\s*(.+))?$", text)
    if not m:
        raise TargetError(f"invalid target {spec!r}: expected FRAMEWORK or FRAMEWORK==VERSION")
    fw = m.group(1).lower()
    if fw not in FRAMEWORKS:
        raise TargetError(f"unknown framework {m.group(1)!r}: known frameworks are {', '.join(FRAMEWORKS)}")
    versions = known_versions(fw)
    if not versions:
        raise TargetError(f"no target data for {fw}")
    if m.group(3) is None:
        return [Target(load_target_data(fw, v), f"{fw}=={v}") for v in versions]
    want = parse_version(m.group(3))
    requested = f"{fw}=={m.group(3).strip()}"
    parsed = [(parse_version(v), v) for v in versions]
    if want < parsed[0][0]:
        raise TargetError(
            f"{requested} is older than the oldest verified {fw} release ({versions[0]}); "
            f"ckptlint supports {fw} >= {versions[0]}"
        )
    if want > parsed[-1][0]:
        t = Target(load_target_data(fw, versions[-1]), requested)
        t.note = (mention(requested) + f" is newer than the newest verified {fw} release; "
                  "checked with the rules of " + mention(f"{fw}=={versions[-1]}"))
        t.note_level = "warning"
        return [t]
    best = max((p for p in parsed if p[0] <= want), key=lambda p: p[0])
    t = Target(load_target_data(fw, best[1]), requested)
    if best[0] != want:
        t.note = (mention(requested) + " was not verified; it resolves to " + mention(f"{fw}=={best[1]}")
                  + ", the newest verified release not newer than it (no relevant change assumed)")
        t.note_level = "info"
    elif _fmt(want) != m.group(3).strip():
        t.note = mention(requested) + " resolves to its base release " + mention(f"{fw}=={best[1]}")
        t.note_level = "info"
    return [t]


_RANGE = re.compile(r"^\s*([A-Za-z_-]+)\s*([<>]=?.*)$")
_BOUND = re.compile(r"^\s*([<>]=?)\s*([0-9][0-9A-Za-z.+]*)\s*$")


def resolve_spec(spec: str) -> list[Target]:
    """A target spec as ``--target`` and the settings' ``target`` take it: what :func:`resolve`
    accepts (``sglang==0.5.15``, ``sglang``), or bounds on the verified releases of a framework
    (``vllm>=0.24``, ``sglang>=0.5.9,<0.5.20``; operators ``>=``, ``>``, ``<=``, ``<``)."""
    return resolve_range(spec) if _RANGE.match(spec) else resolve(spec)


def resolve_range(spec: str) -> list[Target]:
    """The verified releases of a framework within bounds (``vllm>=0.24,<0.33``)."""
    import operator

    ops = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
    m = _RANGE.match(spec)
    if m is None:
        raise TargetError(f"invalid target {spec!r}: expected bounds such as FRAMEWORK>=VERSION,<VERSION")
    bounds = []
    for part in m.group(2).split(","):
        b = _BOUND.match(part)
        if not b:
            raise TargetError(f"invalid target {spec!r}: expected FRAMEWORK, FRAMEWORK==VERSION or bounds "
                              "such as FRAMEWORK>=VERSION,<VERSION")
        bounds.append((ops[b.group(1)], parse_version(b.group(2))))
    chosen = [t for t in resolve(m.group(1))
              if all(op(parse_version(t.version), v) for op, v in bounds)]
    if not chosen:
        raise TargetError(f"no verified release matches {spec!r} (see `ckptlint targets`)")
    return chosen


def range_note(spec: str, chosen: list[Target]) -> str | None:
    """What a range leaves out that a reader may assume it covers: the verified releases newer than
    its last one (an upper bound stops below them), or, for a range open upwards, that releases
    newer than the newest verified one exist but have no target data (and so no verdict)."""
    if not _RANGE.match(spec) or not chosen:
        return None
    fw = chosen[0].framework
    versions = known_versions(fw)
    last = chosen[-1].version
    newer = [v for v in versions if parse_version(v) > parse_version(last)]
    spec = spec.strip()
    if newer:
        return (f"{spec} stops at {fw}=={last}: the newer verified release(s) "
                f"{', '.join(newer)} are not checked")
    return (f"{spec} ends at the newest verified release {fw}=={last}; newer {fw} releases are not "
            f"verified and are not checked (`-t {fw}==VERSION` gives them a no-verdict row)")


def newest_targets() -> list[Target]:
    out = []
    for fw in FRAMEWORKS:
        vs = known_versions(fw)
        if vs:
            out.append(Target(load_target_data(fw, vs[-1]), f"{fw}=={vs[-1]}"))
    return out
