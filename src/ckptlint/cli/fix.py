"""``ckptlint fix``: the minimal skip-list addition that makes one release load the checkpoint."""

import sys
from typing import Annotated, Optional

import typer

from ckptlint.cli import common
from ckptlint.cli.common import EXIT_FINDINGS, EXIT_OK, PathArg, SharedArgs, usage_error


@common.with_options
def fix(
    path: PathArg,
    target: Annotated[Optional[str], typer.Option("--target", "-t", help="FRAMEWORK==VERSION (one target per call; default: the config's target if it names one release)")] = None,
    write: Annotated[bool, typer.Option("--write", help="Apply the change (atomically) instead of printing it (local checkpoints only).")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print the change as a unified diff and write nothing (the default).")] = False,
    backup: Annotated[bool, typer.Option("--backup/--no-backup", help="Keep the original as <file>.orig.")] = True,
    force: Annotated[bool, typer.Option("--force", help="With --write: write a file that is read-only.")] = False,
    *,
    shared: SharedArgs,
) -> None:
    """Print (or --write) the minimal skip-list addition that makes TARGET load the checkpoint."""
    from ckptlint.fix import plan_fix, refuse_write_target
    from ckptlint.reader import NotACheckpoint

    if diff and write:
        usage_error("--diff prints the change and --write applies it: use one of them")
    refusal = refuse_write_target(path) if write else None
    if refusal:
        usage_error(refusal)
    path = common.checkpoint_path(path)
    cfg = common.settings(path, shared)
    release = common.one_target(target, cfg, "fix")
    dep = common.deployment(cfg, shared)
    try:
        with common.endpoint_env(shared.endpoint):
            fp = plan_fix(path, release, dep)
    except NotACheckpoint as exc:
        usage_error(str(exc))
    if fp.diff:
        from ckptlint.render.safe import surrogates_escaped

        # (a lone surrogate can only be in a JSON string of the new text: its escape is the same JSON)
        sys.stdout.write(surrogates_escaped(fp.diff))
        if write:
            _write(path, fp, backup, force)
    elif not fp.not_fixable:
        typer.echo(f"ckptlint: nothing to fix for {release.id}", err=True)
    _explain(fp)
    raise typer.Exit(EXIT_FINDINGS if (fp.not_fixable or fp.remaining) else EXIT_OK)


def _write(path: str, fp, backup: bool, force: bool) -> None:
    from ckptlint.fix import FixRefused, write_fix

    try:
        notes = write_fix(path, fp, backup=backup, force=force)
    except FixRefused as exc:
        usage_error(f"cannot write {fp.file} in {path}: {exc}; {fp.file} was not changed")
    except OSError as exc:
        usage_error(f"cannot write {fp.file} in {path}: {exc.strerror or exc}; {fp.file} was not changed")
    for note in notes:
        typer.echo(f"ckptlint: {note}", err=True)
    typer.echo(f"ckptlint: added {len(fp.added)} entr{'y' if len(fp.added) == 1 else 'ies'} to "
               f"{'.'.join(fp.key_path)} in {fp.file}", err=True)


def _explain(fp) -> None:
    for f, why in fp.not_fixable:
        typer.echo(f"not fixable by config: {f.code} {f.module or f.file}: {why}", err=True)
    for f in fp.remaining:
        typer.echo(f"still failing after the change: {f.code} {f.module}: {f.message}", err=True)
    for f in fp.regressions:
        typer.echo(f"warning: the change gives {f.target} a new load error: {f.code} {f.module}", err=True)
