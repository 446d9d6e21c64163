"""``ckptlint plan``: the per-module load plan of one release."""

import sys
from typing import Annotated, Optional

import typer

from ckptlint.cli import common
from ckptlint.cli.common import Format, PathArg, SharedArgs, usage_error


@common.with_options
def plan(
    path: PathArg,
    target: Annotated[Optional[list[str]], typer.Option("--target", "-t", help="FRAMEWORK==VERSION, once (default: the config's target if it names one release, else the newest verified SGLang release, as for inspect)")] = None,
    module: Annotated[Optional[str], typer.Option("--module", "-m", help="Only runtime modules containing this text.")] = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.text,
    *,
    shared: SharedArgs,
) -> None:
    """Show the per-module load plan of one target: runtime module, decision, reason, stored form."""
    from ckptlint.render.plan import render_plan
    from ckptlint.simulate import simulate

    path = common.checkpoint_path(path)
    cfg = common.settings(path, shared)
    release = common.one_target(target, cfg, "plan", default_newest=True)
    ckpt = common.load(path, shared.endpoint)
    if ckpt.config is None:
        usage_error(f"{path}: no readable config.json, nothing to simulate")
    dep = common.deployment(cfg, shared)
    p = simulate(ckpt, release, dep)
    sys.stdout.write(render_plan(p, module, json_out=format is Format.json))
