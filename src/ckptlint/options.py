"""What the commands resolve from their options, below the command line: the shared deployment and
settings options as one value (:class:`SharedArgs`), usage errors, and how the targets, the
settings and the deployment are resolved from them.

Used by :mod:`ckptlint.cli.common` (which declares the options and re-exports these names) and by
:mod:`ckptlint.batch` (which checks each checkpoint), so that the library code below the CLI never
imports it.
"""

import sys
from enum import Enum
from typing import NamedTuple, NoReturn, Optional

from ckptlint.hardware import get_gpu, gpu_data

# Set by the console entry point (ckptlint._entry), which ends the process with os._exit: a report
# put here is never freed. Freeing a big checkpoint's report object by object, as the command's
# frame unwinds, costs ~15 ms at 92,000 tensors for nothing.
KEEP_UNTIL_EXIT: list | None = None


class Platform(str, Enum):
    cuda = "cuda"
    rocm = "rocm"


class UsageError(Exception):
    """A usage error or unusable input: ``main`` prints ``ckptlint: error: MESSAGE`` and exits 2. (An
    exception rather than an exit, so that a run over many checkpoints can report it for one of
    them and go on.)"""


def usage_error(message: str) -> NoReturn:
    raise UsageError(message)


def echo(message: str) -> None:
    """``typer.echo(message, err=True)`` without importing typer: the same write and flush of the
    message and a newline to stderr. click's echo differs only by removing ANSI escape sequences
    when stderr is not a terminal, so a message with an escape character is still passed to it."""
    if "\x1b" in message:
        import typer

        typer.echo(message, err=True)
        return
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


class SharedArgs(NamedTuple):
    """The deployment options and the settings-file options as one value (see
    :func:`ckptlint.cli.common.with_options`)."""

    speculative: Optional[bool] = None
    platform: Optional[Platform] = None
    tp: Optional[int] = None
    gpu: Optional[str] = None
    ep: Optional[int] = None
    dp_attention: bool = False
    disable_shared_experts_fusion: bool = False
    config: Optional[str] = None
    isolated: bool = False
    endpoint: Optional[str] = None


class ResolvedTargets(NamedTuple):
    """The releases a run's ``--target`` specs name, resolved once by the command and passed down
    (:func:`resolve_targets`), with what each range among them leaves out."""

    targets: tuple  # of ckptlint.targets.Target
    notes: tuple[str, ...] = ()  # ckptlint.targets.range_note of each range, once each


def resolve_targets(specs: list[str] | None) -> ResolvedTargets:
    """The releases named by ``--target`` specs (deduplicated, in order); none: the newest of each
    framework. Besides what :func:`ckptlint.targets.resolve` accepts (``sglang==0.5.15``,
    ``sglang``), a spec may bound the verified releases of a framework: ``vllm>=0.24``,
    ``sglang>=0.5.9,<0.5.20`` (operators ``>=``, ``>``, ``<=``, ``<``). Each spec is resolved
    once; a bad one is a usage error."""
    from ckptlint.targets import TargetError, newest_targets, range_note, resolve_spec

    if not specs:
        return ResolvedTargets(tuple(newest_targets()))
    out, seen, notes = [], set(), []
    for spec in specs:
        try:
            chosen = resolve_spec(spec)
        except TargetError as exc:
            usage_error(str(exc))
        for t in chosen:
            if t.id not in seen:
                seen.add(t.id)
                out.append(t)
        note = range_note(spec, chosen)
        if note and note not in notes:
            notes.append(note)
    return ResolvedTargets(tuple(out), tuple(notes))


def targets(specs: list[str] | None) -> list:
    """The releases of :func:`resolve_targets`, as a list."""
    return list(resolve_targets(specs).targets)


def settings(path: str | None, shared: SharedArgs):
    """The configuration in effect (ckptlint.config); a bad file is a usage error."""
    from ckptlint.config import ConfigError, load

    try:
        cfg = load(path, shared.config, shared.isolated)
    except ConfigError as exc:
        usage_error(str(exc))
    for note in cfg.notes:  # which settings file is used, and a checkpoint's own one that is not
        echo(f"ckptlint: {note}")
    return cfg


def validate(gpu: Optional[str], tp: int, ep: Optional[int]) -> tuple:
    """Canonical GPU key and EP size; a usage error (exit 2) for an unknown GPU or an EP that does
    not divide TP (both frameworks split the MoE intermediate size over TP/EP ranks)."""
    key = None
    if gpu is not None:
        g = get_gpu(gpu)
        if g is None:
            usage_error(f"unknown GPU {gpu!r}; known: {', '.join(gpu_data().gpus)} (see `ckptlint gpus`)")
        key = g.key
    ep = ep or 1
    if ep > tp or tp % ep:
        usage_error(f"--ep {ep} must divide --tp {tp} (experts are split over EP ranks inside the TP group)")
    return key, ep


def deployment(cfg, shared: SharedArgs, *, memory: bool = False, kv_cache_fraction: float | None = None):
    """Deployment options: command line first, then the configuration file, then the defaults.
    ``memory``: check memory fit (DP806) when the deployment is stated (--gpu, or a TP size)."""
    from ckptlint.deployment import Deployment

    c = cfg.config
    tp = shared.tp or c.tp or 1
    gpu, ep = validate(shared.gpu, tp, shared.ep)
    platform = shared.platform.value if shared.platform else c.platform
    if gpu is not None and platform is not None:
        from ckptlint.deployment import _platform_of

        g = get_gpu(gpu)
        if g is not None and _platform_of(g) != platform:
            where = "--platform" if shared.platform else f"platform = {platform!r} in {cfg.label}"
            usage_error(f"--gpu {shared.gpu} is a {_platform_of(g)} GPU and {where} says {platform}: "
                        "give one of them, or a GPU of that platform (`ckptlint gpus`)")
    stated = shared.gpu is not None or shared.tp is not None or c.tp is not None
    return Deployment(speculative=shared.speculative if shared.speculative is not None else c.speculative,
                      platform=platform, tp=tp, gpu=gpu, ep=ep,
                      dp_attention=shared.dp_attention,
                      shared_experts_fusion=False if shared.disable_shared_experts_fusion else None,
                      memory_check=memory and stated, kv_cache_fraction=kv_cache_fraction)
