"""What the commands share: exit codes, option types, the deployment and settings options (declared
once, added to a command by :func:`with_options`), and how targets, settings and the deployment
are resolved from them."""

import contextlib
import functools
import inspect as _inspect
import os
import sys
from enum import Enum
from typing import Annotated, Any, Callable, NamedTuple, Optional

from ckptlint.fsutil import write_output
# resolved below the command line (ckptlint.options: batch uses them too); re-exported for the commands
from ckptlint.options import (Platform, ResolvedTargets, SharedArgs, UsageError, deployment, echo,  # noqa: F401
                              resolve_targets, settings, targets, usage_error, validate)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class Format(str, Enum):
    text = "text"
    json = "json"


class CheckFormat(str, Enum):
    """``check`` also writes JSON lines, Markdown, SARIF 2.1.0, GitHub workflow-command annotations and one line per finding (concise)."""

    text = "text"
    json = "json"
    jsonl = "jsonl"
    markdown = "markdown"
    sarif = "sarif"
    github = "github"
    concise = "concise"


class RulesFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"


class NoVerdict(str, Enum):
    """What a release with no verdict (not simulated, newer than the target data, container only) does
    to the exit code."""

    fail = "fail"
    pass_ = "pass"


def emit(text: str, output: str | None) -> None:
    """Write a report to ``output`` (``--output``: atomically where possible) or to stdout."""
    if output:
        try:
            write_output(output, text.encode("utf-8"))
        except OSError as exc:
            usage_error(f"cannot write {output}: {exc.strerror or exc}")
    else:
        sys.stdout.write(text)


# ----------------------------------------------------------------------------- declarations

class Decl(NamedTuple):
    """The arguments of a ``Option(...)`` or ``Argument(...)``, kept as data: the
    commands declare their parameters with these (:func:`Option`, :func:`Argument`), so that
    ``ckptlint check`` can parse its command line without importing typer (:mod:`ckptlint.cli.argv`,
    ~40 ms of imports); :func:`to_typer` makes the typer objects when the typer app is built
    (help, errors, every other command)."""

    kind: str  # "Option" or "Argument"
    args: tuple
    kwargs: dict


def Option(*args: Any, **kwargs: Any) -> Decl:
    return Decl("Option", args, kwargs)


def Argument(*args: Any, **kwargs: Any) -> Decl:
    return Decl("Argument", args, kwargs)


# How ``--help`` groups the options of every command (typer's ``rich_help_panel``, which
# :class:`HelpCommand` also honours in plain help) and what it calls their values (instead of
# ``<str>``). Kept here, by option name, rather than in each declaration: one table for every command.
PANEL_ORDER = ("Input", "Targets", "Deployment", "Rules", "Output", "CI")
_PANEL_OF = {
    **dict.fromkeys(("--config", "--isolated", "--endpoint", "--module"), "Input"),
    **dict.fromkeys(("--target", "--from", "--to"), "Targets"),
    **dict.fromkeys(("--speculative", "--platform", "--tp", "--gpu", "--ep", "--dp-attention",
                     "--disable-shared-experts-fusion", "--kv-cache-fraction", "--reserve-gib"), "Deployment"),
    **dict.fromkeys(("--select", "--ignore", "--extend-select"), "Rules"),
    **dict.fromkeys(("--format", "--output", "--report", "--color", "--quiet", "--diff", "--write", "--backup",
                     "--force"), "Output"),
    **dict.fromkeys(("--fail-on", "--no-verdict", "--baseline", "--write-baseline"), "CI"),
}
_METAVAR = {"--target": "SPEC", "--from": "RELEASE", "--to": "RELEASE", "--select": "RULE", "--ignore": "RULE",
            "--extend-select": "RULE", "--output": "FILE", "--report": "FORMAT:FILE", "--baseline": "FILE",
            "--write-baseline": "FILE", "--gpu": "GPU", "--config": "FILE", "--endpoint": "URL", "--tp": "N",
            "--ep": "N", "--kv-cache-fraction": "F", "--module": "TEXT", "--reserve-gib": "GIB"}


def _help_settings(words: tuple) -> dict[str, str]:
    first = next((w.partition("/")[0] for w in words if isinstance(w, str) and w.startswith("--")), None)
    out = {}
    if first in _PANEL_OF:
        out["rich_help_panel"] = _PANEL_OF[first]
    if first in _METAVAR:
        out["metavar"] = _METAVAR[first]
    return out


def to_typer(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with every :class:`Decl` in its parameters' annotations made into typer's object,
    and every option given its help panel and value name (``_PANEL_OF``, ``_METAVAR``)."""
    import typer

    sig = _inspect.signature(func)

    def make(m: Any) -> Any:
        if isinstance(m, Decl):
            extra = _help_settings(m.args) if m.kind == "Option" else {}
            return getattr(typer, m.kind)(*m.args, **{**extra, **m.kwargs})
        if isinstance(m, typer.models.OptionInfo):
            for k, v in _help_settings((m.default, *(m.param_decls or ()))).items():
                if getattr(m, k, None) is None:
                    setattr(m, k, v)
        return m

    def convert(ann: Any) -> Any:
        meta = getattr(ann, "__metadata__", ())
        if not any(isinstance(m, (Decl, typer.models.OptionInfo)) for m in meta):
            return ann
        made = tuple(make(m) for m in meta)
        return Annotated[(ann.__origin__, *made)]  # type: ignore[valid-type]

    params = [p.replace(annotation=convert(p.annotation)) for p in sig.parameters.values()]

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    del command.__wrapped__  # typer reads the signature above, not func's
    return command


def help_command_class():
    """typer's command class with ``--help`` grouped into the panels of ``PANEL_ORDER`` in plain text
    too (typer groups by ``rich_help_panel`` only in its rich output, which this CLI turns off)."""
    from typer.core import TyperCommand

    class HelpCommand(TyperCommand):
        def format_options(self, ctx, formatter) -> None:
            args: list = []
            panels: dict[str, list] = {}
            for param in self.get_params(ctx):
                rv = param.get_help_record(ctx)
                if rv is None:
                    continue
                if param.param_type_name == "argument":
                    args.append(rv)
                else:
                    panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(rv)
            if args:
                with formatter.section("Arguments"):
                    formatter.write_dl(args)
            order = {p: i for i, p in enumerate(PANEL_ORDER)}
            for name in sorted(panels, key=lambda p: order.get(p, len(order))):
                with formatter.section(name):
                    formatter.write_dl(panels[name])

    return HelpCommand


EXIT_CODES_HELP = (
    "\b\nExit codes:\n"
    "  0  nothing at or above --fail-on, and a verdict on every release\n"
    "  1  findings at or above --fail-on, or a release with no verdict (--no-verdict pass accepts it)\n"
    "  2  usage error or unusable input (also contradictory options)\n"
    "  3  internal error (a bug; --debug shows the traceback)\n\n"
    "\b\nGlobal options (before the command): --version, --debug")


# ----------------------------------------------------------------------------- shared options

PathArg = Annotated[str, Argument(help="Checkpoint directory, .safetensors file, or hf://ORG/REPO[@REVISION].")]
KvFractionOpt = Annotated[Optional[float], Option(
    "--kv-cache-fraction", min=0.0, max=0.9,
    help="Share of each GPU's memory the KV cache needs after weights and runtime reserve for a "
         "deployment to fit (default 0.10; memory fit is checked when --gpu or --tp is given).")]
TargetsOpt = Annotated[Optional[list[str]], Option(
    "--target", "-t", help="FRAMEWORK==VERSION (e.g. sglang==0.5.15), FRAMEWORK for every verified release, or "
    "bounds such as 'vllm>=0.24'; repeatable. Default: the newest verified release of each framework.")]


_SHARED: list[tuple[str, Any]] = [
    ("speculative", Annotated[Optional[bool], Option(
        "--speculative/--no-speculative",
        help="MTP speculative decoding with the checkpoint's own MTP layer (default: on when config.json declares one). "
        "Findings about the MTP layer (missing or mis-stored MTP weights, MT7xx, and the draft model's modules) exist "
        "only with it on; --no-speculative checks the serving setup without speculative decoding.")]),
    ("platform", Annotated[Optional[Platform], Option(
        "--platform", help="cuda or rocm (default: the quant format's native platform).")]),
    ("tp", Annotated[Optional[int], Option("--tp", min=1, max=65536, help="Tensor-parallel size (default 1).")]),
    ("gpu", Annotated[Optional[str], Option(
        "--gpu", help="GPU to assume (`ckptlint gpus`; default: the format's native GPU).")]),
    ("ep", Annotated[Optional[int], Option("--ep", min=1, max=65536, help="Expert-parallel size (divides --tp; default 1).")]),
    ("dp_attention", Annotated[bool, Option(
        "--dp-attention", help="Data-parallel attention: attention projections whole on every rank.")]),
    ("disable_shared_experts_fusion", Annotated[bool, Option(
        "--disable-shared-experts-fusion",
        help="Assume SGLang runs with --disable-shared-experts-fusion (default: its own default for the model and GPU).")]),
    ("config", Annotated[Optional[str], Option(
        "--config", help="Use this configuration file (ckptlint.toml, or pyproject.toml with [tool.ckptlint]) "
        "instead of looking next to the checkpoint, then in the current directory.")]),
    ("isolated", Annotated[bool, Option("--isolated", help="Ignore all configuration files.")]),
    ("endpoint", Annotated[Optional[str], Option(
        "--endpoint", help="Hub URL for hf://ORG/REPO[@REVISION] paths (default: $HF_ENDPOINT or https://huggingface.co).")]),
]
_SHARED_DEFAULTS = SharedArgs._field_defaults


def with_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the shared deployment and settings options.

    ``func`` declares its own parameters and one parameter ``shared: SharedArgs``; the command
    typer sees has ``func``'s own parameters followed by every shared option, and ``func`` receives
    the shared options' values packed into ``shared``."""
    sig = _inspect.signature(func)
    own = [p for p in sig.parameters.values() if p.name != "shared"]
    extra = [_inspect.Parameter(name, _inspect.Parameter.KEYWORD_ONLY, default=_SHARED_DEFAULTS[name], annotation=ann)
             for name, ann in _SHARED]

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        shared = SharedArgs(**{name: kwargs.pop(name) for name, _ in _SHARED})
        return func(shared=shared, **kwargs)

    params = [p.replace(kind=_inspect.Parameter.KEYWORD_ONLY) for p in own] + extra
    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    del command.__wrapped__  # typer reads the signature above, not func's
    return command


# ----------------------------------------------------------------------------- resolution

def checkpoint_path(path: str) -> str:
    """The checkpoint a command works on for ``path`` (a shard or config file stands for the
    checkpoint directory beside it; ``ckptlint.inputs.resolve_input``), said on stderr when it differs."""
    from ckptlint.inputs import resolve_input

    resolved, note = resolve_input(path)
    if note and resolved != path:
        from ckptlint.render.safe import clean

        echo(f"ckptlint: {clean(note)}")
    return resolved


@contextlib.contextmanager
def endpoint_env(endpoint: str | None):
    """``--endpoint`` for code that reads hf:// paths through ``HF_ENDPOINT`` (``fix``): set for the block."""
    if endpoint is None:
        yield
        return
    old = os.environ.get("HF_ENDPOINT")
    os.environ["HF_ENDPOINT"] = endpoint
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_ENDPOINT", None)
        else:
            os.environ["HF_ENDPOINT"] = old


def load(path: str, endpoint: str | None):
    """Read a checkpoint for ``plan``/``inspect``; unusable input is a usage error."""
    from ckptlint.inputs import not_a_checkpoint
    from ckptlint.reader import NotACheckpoint, load_checkpoint, open_path

    src = None
    try:
        src = open_path(path, endpoint=endpoint)
        return load_checkpoint(src)
    except NotACheckpoint as exc:
        usage_error(not_a_checkpoint(src, exc))


def newest_sglang():
    """The default release of ``plan`` and ``inspect``: the newest verified SGLang release."""
    from ckptlint.targets import newest_targets

    return next(t for t in newest_targets() if t.framework == "sglang")


def fix_targets(specs: list[str] | None, cfg):
    """The releases ``fix`` makes one edit for: the ``--target`` specs (ranges and several allowed),
    else the config's ``target``; neither is a usage error."""
    specs = specs or cfg.config.target or []
    if not specs:
        usage_error("fix needs --target (FRAMEWORK==VERSION, FRAMEWORK or a range such as 'vllm>=0.24'), "
                    "or a target in the settings file")
    return targets(specs)


def one_target(target: "str | list[str] | None", cfg, command: str, *, default_newest: bool = False):
    """The single release ``plan`` works on: --target, else the config's ``target`` if it names
    one, else (``default_newest``) the newest verified SGLang release, said on stderr. ``--target``
    given more than once is a usage error (rather than silently using the last)."""
    if isinstance(target, list):
        if len(target) > 1:
            usage_error(f"{command} takes one release, --target was given {len(target)} times "
                        f"({', '.join(target)}): run {command} once per release")
        target = target[0] if target else None
    specs = [target] if target else (cfg.config.target or [])
    if not specs and default_newest:
        release = newest_sglang()
        echo(f"ckptlint: {command}: no --target given: {release.id} (the newest verified SGLang release)")
        return release
    if not specs:
        usage_error(f"{command} needs --target FRAMEWORK==VERSION")
    ts = targets(specs)
    if len(ts) != 1:
        usage_error(f"{command} takes exactly one release: FRAMEWORK==VERSION")
    return ts[0]
