"""Configuration files: ``ckptlint.toml`` or ``[tool.ckptlint]`` in ``pyproject.toml``.

Where it is found (the first hit wins; files are never merged):

1. ``--isolated``: no configuration file at all (``--config`` with it is a usage error).
2. ``--config FILE``: that file. A file named ``pyproject.toml`` is read from its
   ``[tool.ckptlint]`` table (which must exist); any other file from its top-level keys.
3. The checkpoint's own directory (the directory PATH names, or the directory of a
   ``.safetensors`` file): ``ckptlint.toml``, then ``pyproject.toml`` if it has a
   ``[tool.ckptlint]`` table -- only when that directory lies inside the current working
   directory (the user's own repository; symbolic links resolved). A checkpoint elsewhere (a
   download, the Hugging Face cache) or on the Hub must not be able to switch off the check of
   itself: its settings are skipped, and :attr:`LoadedConfig.notes` says so.
4. The current working directory, looked up the same way.

Parent directories are not searched. Settings files are read with :func:`load_toml` (at most
``TOML_CAP`` bytes of UTF-8, regular files only). Command-line flags override the file's values
(``--target`` replaces ``target``; for rule selection the command line is a second layer on
top of the file, see ``ckptlint.selection``).

Keys (TOML, kebab-case)::

    target = ["sglang==0.5.15", "vllm>=0.30"]  # target specs, as for --target (ranges too)
    select = ["QD", "MT701"]                 # codes, prefixes (QD, QD4), names, or ALL
    ignore = ["TG602"]
    extend-select = ["quantization-mismatch"]
    fail-on = "warning"                      # error | warning | info
    no-verdict = "pass"                      # fail (default) | pass: a release with no verdict
    speculative = false                      # MTP speculative decoding
    platform = "rocm"                        # cuda | rocm
    tp = 8
    per-tensor-ignores = [
      { pattern = "model.layers.78.*", codes = ["QD401"], reason = "MTP layer is not served" },
    ]
    per-module-ignores = [
      { pattern = "model.eh_proj", codes = ["QD"], reason = "..." },
    ]

Parsing is strict: an unknown key, a value of the wrong type, an ignore entry without a
non-empty ``reason``, an unknown rule selector, an empty ``select`` (it would switch every rule
off) or an unresolvable target is a :class:`ConfigError`, which the command line reports in one
line and exits with 2.

:func:`read_capped`, :func:`load_toml` and :func:`load_json` read any small file the user names
(settings, baselines) without hanging on a FIFO or a device, without reading more than a cap, and
turn every way the file can be unusable (size, encoding, nesting, lone surrogates) into an
:class:`UnusableFile` error with a one-line message that names the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ckptlint.fsutil import FileRefused, read_capped as read
from ckptlint.jsonlimits import MAX_INT_DIGITS, JsonLimitError, loads
from ckptlint.targets import TargetError, resolve_spec


CONFIG_NAMES = ("ckptlint.toml", "pyproject.toml")
# A settings file is a few hundred bytes; the largest pyproject.toml files of big monorepos are
# about 100 KB. 1 MiB leaves room for any of them and parses in well under a second.
TOML_CAP = 1 << 20


class UnusableFile(ValueError):
    """A file the user named that ckptlint cannot use; the message names it (exit 2)."""


class ConfigError(UnusableFile):
    """A configuration problem: a usage error (exit 2)."""


# --- reading small files safely (settings here; baseline.py reads baselines the same way) -----

def read_capped(path: str | Path, cap: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes (:func:`ckptlint.fsutil.read_capped`: a
    FIFO, device or socket is refused before it is read, a larger file from its size); any refusal is
    an :class:`UnusableFile` naming the file and ``what`` it is."""
    p = os.fspath(path)
    try:
        return read(p, cap)
    except FileNotFoundError:
        raise UnusableFile(f"{p}: {what} not found") from None
    except FileRefused as exc:
        raise UnusableFile(f"{p}: {what} {exc.why}") from None
    except (OSError, ValueError) as exc:
        raise UnusableFile(f"{p}: cannot read {what}: {getattr(exc, 'strerror', None) or exc}") from None


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


def utf8_bytes(raw: bytes, label: str, what: str = "file") -> bytes:
    """``raw`` without a UTF-8 byte-order mark, checked to be UTF-8 (no copy of an ASCII file is made);
    any other encoding is an UnusableFile."""
    for bom, name in _BOMS:
        if raw.startswith(bom):
            raise UnusableFile(f"{label}: {what} is {name} text; ckptlint reads UTF-8 (save it as UTF-8)")
    if b"\x00" in raw:
        raise UnusableFile(f"{label}: {what} holds NUL bytes: not UTF-8 text (UTF-16 without a byte-order mark?)")
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnusableFile(f"{label}: {what} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                               f"{exc.start})") from None
    return raw


def decode_text(raw: bytes, label: str, what: str = "file") -> str:
    """UTF-8 text (a UTF-8 byte-order mark is dropped); any other encoding is an UnusableFile."""
    return utf8_bytes(raw, label, what).decode("utf-8")


def load_toml(path: str | Path, cap: int = TOML_CAP, what: str = "configuration file") -> dict[str, Any]:
    """A TOML document, read with :func:`read_capped` and :func:`decode_text`."""
    import re
    import tomllib

    text = decode_text(read_capped(path, cap, what), str(path), what)
    # tomllib converts integers with int(): a longer run of digits (TOML lets `_` separate them) is
    # refused before it is converted (anywhere, strings and comments included: no setting needs one).
    # Each run is tried once, from its first digit (the look-behind): linear in the text.
    m = re.search(r"(?<![0-9_])[0-9](?:_?[0-9]){%d}(?:_?[0-9])*" % MAX_INT_DIGITS, text)
    if m is not None:
        line = text.count("\n", 0, m.start()) + 1
        digits = len(m.group().replace("_", ""))
        raise UnusableFile(f"{path}: invalid TOML: a run of {digits:,} digits at line {line} (more than "
                           f"{MAX_INT_DIGITS:,}, Python's limit for an integer)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UnusableFile(f"{path}: invalid TOML: {exc}") from None
    except ValueError as exc:  # pragma: no cover - a number tomllib cannot convert (refused above)
        raise UnusableFile(f"{path}: invalid TOML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise UnusableFile(f"{path}: invalid TOML: arrays or tables nested too deeply") from None


def load_json(path: str | Path, cap: int, what: str = "file", fast: Any = None) -> Any:
    """A JSON document, read with :func:`read_capped` and :func:`decode_text` and parsed by
    :func:`ckptlint.jsonlimits.loads` (``fast``: a typed msgspec decoder to try first), whose strings
    are all encodable text (no lone surrogate such as ``"\\ud800"``)."""
    text = decode_text(read_capped(path, cap, what), str(path), what)
    try:
        doc = loads(text, fast=fast)
    except JsonLimitError as exc:  # bad JSON, nested too deeply, an integer of too many digits
        raise UnusableFile(f"{path}: invalid JSON: {exc.message}") from None
    where = surrogate_path(doc)
    if where is not None:
        raise UnusableFile(f"{path}: {what} holds a lone surrogate (not text) at {where}")
    return doc


def _bad_text(s: str) -> bool:
    if s.isascii():
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def surrogate_path(doc: Any) -> str | None:
    """Where in a parsed JSON/TOML document a string (or key) holds a lone surrogate, or None."""
    stack: list[tuple[Any, str]] = [(doc, "(top level)")]
    while stack:
        obj, where = stack.pop()
        if isinstance(obj, str):
            if _bad_text(obj):
                return where
        elif isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(k, str) and _bad_text(k):
                    return f"{where} (a key)"
                stack.append((v, k if where == "(top level)" else f"{where}.{k}"))
        elif isinstance(obj, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(obj))
    return None


@dataclass(frozen=True)
class _Defaults:
    """The configuration in effect when no file is used (same attributes as config_schema.Config)."""

    target: Optional[list[str]] = None
    select: Optional[list[str]] = None
    ignore: tuple = ()
    extend_select: tuple = ()
    fail_on: Optional[str] = None
    no_verdict: Optional[str] = None
    speculative: Optional[bool] = None
    platform: Optional[str] = None
    tp: Optional[int] = None
    per_tensor_ignores: tuple = ()
    per_module_ignores: tuple = ()


def __getattr__(name: str) -> Any:  # Config, IgnoreEntry, KEYS, IGNORE_KEYS live in config_schema
    if name in ("Config", "IgnoreEntry", "KEYS", "IGNORE_KEYS"):
        from ckptlint import config_schema

        return getattr(config_schema, name)
    raise AttributeError(name)


@dataclass
class LoadedConfig:
    """The configuration in effect: ``path`` is None when no file was used."""

    config: Any = field(default_factory=_Defaults)
    path: Path | None = None
    skipped: Path | None = None  # a settings file in the checkpoint's directory that discovery skipped

    @property
    def label(self) -> str:
        if self.path is None:
            return "(no configuration file)"
        return f"{self.path} [tool.ckptlint]" if self.path.name == "pyproject.toml" else str(self.path)

    @property
    def notes(self) -> list[str]:
        """What the command line says on stderr about settings: which file is used, which is skipped."""
        out = [f"settings from {self.label}"] if self.path is not None else []
        if self.skipped is not None:
            out.append(f"not using {self.skipped}: settings in a checkpoint's own directory apply only when it "
                       "lies inside the directory ckptlint runs from; name the file with --config to use it")
        return out

    def selection_layer(self):
        from ckptlint.selection import Layer

        c = self.config
        return Layer(select=c.select, extend_select=c.extend_select, ignore=c.ignore)

    def ignore_rules(self):
        from ckptlint.selection import IgnoreRule

        c = self.config
        return ([IgnoreRule("tensor", e.pattern, e.codes, e.reason) for e in c.per_tensor_ignores]
                + [IgnoreRule("module", e.pattern, e.codes, e.reason) for e in c.per_module_ignores])


# Entries of any list in a settings file (select, ignore, target, the ignore lists and each entry's
# codes): far more than any real selection, few enough that validating them (each bad entry is an
# error the schema describes) stays small. Checked before the schema sees the document: a 1 MiB file of
# 340,000 `{}` ignore entries took 1.2 GB and 15 s of validation.
MAX_SETTING_ENTRIES = 10_000


def _check_sizes(data: Any, label: str) -> None:
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        items = value if isinstance(value, list) else []
        if len(items) > MAX_SETTING_ENTRIES:
            raise ConfigError(f"{label}: {key}: {len(items):,} entries, more than ckptlint reads "
                              f"({MAX_SETTING_ENTRIES:,})")
        for i, item in enumerate(items):
            for k, v in (item.items() if isinstance(item, dict) else ()):
                if isinstance(v, list) and len(v) > MAX_SETTING_ENTRIES:
                    raise ConfigError(f"{label}: {key}[{i}].{k}: {len(v):,} entries, more than ckptlint reads "
                                      f"({MAX_SETTING_ENTRIES:,})")


def parse(data: dict[str, Any], label: str) -> Any:
    """Validate a ``[tool.ckptlint]`` table or a ``ckptlint.toml`` document."""
    from pydantic import ValidationError

    from ckptlint.config_schema import Config, _describe
    from ckptlint.selection import SelectorError, check_selectors

    _check_sizes(data, label)
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{label}: {_describe(exc)}") from None
    if cfg.select is not None and not cfg.select and not cfg.extend_select:
        raise ConfigError(f"{label}: select: an empty list selects no rule, which would switch every check off "
                          "(list codes, prefixes or ALL, or leave select out)")
    for key, sel in (("select", cfg.select or []), ("ignore", cfg.ignore), ("extend-select", cfg.extend_select)):
        try:
            check_selectors(sel)
        except SelectorError as exc:
            raise ConfigError(f"{label}: {key}: {exc}") from None
    for kind, entries in (("per-tensor-ignores", cfg.per_tensor_ignores),
                          ("per-module-ignores", cfg.per_module_ignores)):
        for i, e in enumerate(entries):
            try:
                check_selectors(e.codes)
            except SelectorError as exc:
                raise ConfigError(f"{label}: {kind}[{i}].codes: {exc}") from None
    for spec in cfg.target or []:
        try:
            resolve_spec(spec)
        except TargetError as exc:
            raise ConfigError(f"{label}: target: {exc}") from None
    return cfg


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return load_toml(path)
    except UnusableFile as exc:
        raise ConfigError(str(exc)) from None


def _table(path: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    """The ckptlint table of a parsed file (None: a pyproject.toml without one)."""
    if path.name != "pyproject.toml":
        return doc
    tool = doc.get("tool")
    table = tool.get("ckptlint") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.ckptlint] must be a table")
    return table


def load_file(path: str | Path) -> LoadedConfig:
    """Read a file named explicitly (``--config``)."""
    p = Path(path)
    table = _table(p, _read_toml(p))
    if table is None:
        raise ConfigError(f"{p}: no [tool.ckptlint] table")
    loaded = LoadedConfig(path=p)
    loaded.config = parse(table, loaded.label)
    return loaded


def _config_dir(checkpoint: str | Path) -> Path | None:
    if str(checkpoint).startswith("hf://"):
        return None  # a Hub checkpoint's own files are never settings
    p = Path(checkpoint)
    try:
        if p.is_dir():
            return p
        if p.is_file():
            return p.parent
    except OSError:  # e.g. a name too long for the file system: reported when the checkpoint is read
        pass
    return None


def _inside(d: Path, root: Path) -> bool:
    """Whether directory ``d`` is ``root`` or lies below it (symbolic links resolved)."""
    try:
        return d.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


def _settings_in(d: Path, strict: bool = True) -> Path | None:
    """The settings file of directory ``d``: ``ckptlint.toml``, else a ``pyproject.toml`` with a
    ``[tool.ckptlint]`` table. ``strict=False``: a file that cannot be read counts as none."""
    for name in CONFIG_NAMES:
        candidate = d / name
        if not candidate.is_file():
            continue
        if name == "pyproject.toml":
            try:
                if _table(candidate, _read_toml(candidate)) is None:
                    continue
            except ConfigError:
                if strict:
                    raise
                continue
        return candidate
    return None


def discover(checkpoint: str | Path | None, cwd: str | Path | None = None) -> tuple[Path | None, Path | None]:
    """(the settings file discovery uses, the checkpoint-directory file it skipped), see the
    module docstring: settings in the checkpoint's own directory apply only when that directory
    lies inside ``cwd``."""
    work = Path(cwd) if cwd is not None else Path(".")
    dirs: list[Path] = []
    skipped = None
    d = _config_dir(checkpoint) if checkpoint is not None else None
    if d is not None:
        if _inside(d, work):
            dirs.append(d)
        else:
            skipped = _settings_in(d, strict=False)
    dirs.append(work)
    seen: set[Path] = set()
    for d in dirs:
        try:
            key = d.resolve()
        except OSError:
            continue
        if key in seen:
            continue
        seen.add(key)
        found = _settings_in(d)
        if found is not None:
            return found, skipped
    return None, skipped


def find(checkpoint: str | Path | None, cwd: str | Path | None = None) -> Path | None:
    """The file discovery would use (see the module docstring), or None."""
    return discover(checkpoint, cwd)[0]


def load(checkpoint: str | Path | None, config_file: str | None = None, isolated: bool = False,
         cwd: str | Path | None = None) -> LoadedConfig:
    """The configuration in effect for a command on ``checkpoint``."""
    if isolated:
        if config_file:
            raise ConfigError("--config cannot be used with --isolated")
        return LoadedConfig()
    if config_file:
        return load_file(config_file)
    found, skipped = discover(checkpoint, cwd)
    loaded = load_file(found) if found is not None else LoadedConfig()
    loaded.skipped = skipped
    return loaded
