"""Configuration files: ``ckptlint.toml`` or ``[tool.ckptlint]`` in ``pyproject.toml``.

Where it is found (the first hit wins; files are never merged):

1. ``--isolated``: no configuration file at all (``--config`` with it is a usage error).
2. ``--config FILE``: that file. A file named ``pyproject.toml`` is read from its
   ``[tool.ckptlint]`` table (which must exist); any other file from its top-level keys.
3. The checkpoint's own directory (the directory PATH names, or the directory of a
   ``.safetensors`` file): ``ckptlint.toml``, then ``pyproject.toml`` if it has a
   ``[tool.ckptlint]`` table.
4. The current working directory, looked up the same way.

Parent directories are not searched. Command-line flags override the file's values
(``--target`` replaces ``target``; for rule selection the command line is a second layer on
top of the file, see ``ckptlint.selection``).

Keys (TOML, kebab-case)::

    target = ["sglang==0.5.15", "vllm"]      # target specs, as for --target
    select = ["QD", "MT701"]                 # codes, prefixes (QD, QD4), names, or ALL
    ignore = ["TG602"]
    extend-select = ["quantization-mismatch"]
    fail-on = "warning"                      # error | warning | info
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
non-empty ``reason``, an unknown rule selector or an unresolvable target is a
:class:`ConfigError`, which the command line reports in one line and exits with 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


CONFIG_NAMES = ("ckptlint.toml", "pyproject.toml")


class ConfigError(ValueError):
    """A configuration problem: a usage error (exit 2)."""


@dataclass(frozen=True)
class _Defaults:
    """The configuration in effect when no file is used (same attributes as config_schema.Config)."""

    target: Optional[list[str]] = None
    select: Optional[list[str]] = None
    ignore: tuple = ()
    extend_select: tuple = ()
    fail_on: Optional[str] = None
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

    @property
    def label(self) -> str:
        if self.path is None:
            return "(no configuration file)"
        return f"{self.path} [tool.ckptlint]" if self.path.name == "pyproject.toml" else str(self.path)

    def selection_layer(self):
        from ckptlint.selection import Layer

        c = self.config
        return Layer(select=c.select, extend_select=c.extend_select, ignore=c.ignore)

    def ignore_rules(self):
        from ckptlint.selection import IgnoreRule

        c = self.config
        return ([IgnoreRule("tensor", e.pattern, e.codes, e.reason) for e in c.per_tensor_ignores]
                + [IgnoreRule("module", e.pattern, e.codes, e.reason) for e in c.per_module_ignores])


def parse(data: dict[str, Any], label: str) -> Any:
    """Validate a ``[tool.ckptlint]`` table or a ``ckptlint.toml`` document."""
    from pydantic import ValidationError

    from ckptlint.config_schema import Config, _describe
    from ckptlint.selection import SelectorError, check_selectors
    from ckptlint.targets import TargetError, resolve

    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{label}: {_describe(exc)}") from None
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
            resolve(spec)
        except TargetError as exc:
            raise ConfigError(f"{label}: target: {exc}") from None
    return cfg


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration file: {exc.strerror or exc}") from None


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
    if not p.is_file():
        raise ConfigError(f"{p}: configuration file not found")
    table = _table(p, _read_toml(p))
    if table is None:
        raise ConfigError(f"{p}: no [tool.ckptlint] table")
    loaded = LoadedConfig(path=p)
    loaded.config = parse(table, loaded.label)
    return loaded


def _config_dir(checkpoint: str | Path) -> Path | None:
    if str(checkpoint).startswith("hf://"):
        return None  # a remote repository has no directory here (and its own settings never apply)
    p = Path(checkpoint)
    try:
        if p.is_dir():
            return p
        if p.is_file():
            return p.parent
    except OSError:  # e.g. a name too long for the file system: reported when the checkpoint is read
        pass
    return None


def find(checkpoint: str | Path | None, cwd: str | Path | None = None) -> Path | None:
    """The file discovery would use (see the module docstring), or None."""
    dirs: list[Path] = []
    if checkpoint is not None:
        d = _config_dir(checkpoint)
        if d is not None:
            dirs.append(d)
    dirs.append(Path(cwd) if cwd is not None else Path("."))
    seen: set[Path] = set()
    for d in dirs:
        try:
            key = d.resolve()
        except OSError:
            continue
        if key in seen:
            continue
        seen.add(key)
        for name in CONFIG_NAMES:
            candidate = d / name
            if not candidate.is_file():
                continue
            if name == "pyproject.toml" and _table(candidate, _read_toml(candidate)) is None:
                continue
            return candidate
    return None


def load(checkpoint: str | Path | None, config_file: str | None = None, isolated: bool = False,
         cwd: str | Path | None = None) -> LoadedConfig:
    """The configuration in effect for a command on ``checkpoint``."""
    if isolated:
        if config_file:
            raise ConfigError("--config cannot be used with --isolated")
        return LoadedConfig()
    if config_file:
        return load_file(config_file)
    found = find(checkpoint, cwd)
    return load_file(found) if found is not None else LoadedConfig()
