"""Command line: ``ckptlint check | plan | targets | rules | rule``.

Exit codes: 0 no finding at or above ``--fail-on``; 1 findings at or above it; 2 usage error or
unusable input; 3 internal error (a bug: short message, traceback only with ``--debug``).
"""



import sys
from enum import Enum
from typing import Annotated, Optional

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class Format(str, Enum):
    text = "text"
    json = "json"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"


class Platform(str, Enum):
    cuda = "cuda"
    rocm = "rocm"


def _usage_error(message: str) -> None:
    import typer

    typer.echo(f"ckptlint: error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)


def _targets(specs: list[str] | None):
    from ckptlint.targets import TargetError, newest_targets, resolve

    if not specs:
        return newest_targets()
    out, seen = [], set()
    for spec in specs:
        try:
            for t in resolve(spec):
                if t.id not in seen:
                    seen.add(t.id)
                    out.append(t)
        except TargetError as exc:
            _usage_error(str(exc))
    return out


def _build_app():
    import typer

    app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                      add_completion=False,
                      help="Predict whether a quantized LLM checkpoint will load (or load wrong) on a given "
                           "SGLang or vLLM release, from config.json and safetensors headers alone.")

    TargetOpt = Annotated[Optional[list[str]], typer.Option(
        "--target", "-t", help="FRAMEWORK==VERSION (e.g. sglang==0.5.15) or FRAMEWORK for every verified "
        "release; repeatable. Default: the newest verified release of each framework.")]
    SpecOpt = Annotated[Optional[bool], typer.Option(
        "--speculative/--no-speculative",
        help="MTP speculative decoding with the checkpoint's own MTP layer (default: on when config.json declares one).")]
    PlatformOpt = Annotated[Optional[Platform], typer.Option("--platform", help="cuda or rocm (default: the quant format's native platform).")]
    TpOpt = Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel size (default 1).")]
    GpuOpt = Annotated[Optional[str], typer.Option("--gpu", help="GPU to assume (`ckptlint gpus`; default: the format's native GPU).")]
    EpOpt = Annotated[Optional[int], typer.Option("--ep", min=1, help="Expert-parallel size (divides --tp; default 1).")]
    DpAttOpt = Annotated[bool, typer.Option("--dp-attention", help="Data-parallel attention: attention projections whole on every rank.")]
    EndpointOpt = Annotated[Optional[str], typer.Option(
        "--endpoint", help="Hub URL for hf://ORG/REPO[@REVISION] paths (default: $HF_ENDPOINT or https://huggingface.co).")]

    @app.command()
    def check(
        path: Annotated[str, typer.Argument(help="Checkpoint directory, .safetensors file, or hf://ORG/REPO[@REVISION].")],
        target: TargetOpt = None,
        format: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.text,
        fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Lowest severity that makes the exit code 1.")] = FailOn.error,
        select: Annotated[Optional[list[str]], typer.Option("--select", help="Only these rule codes or names.")] = None,
        speculative: SpecOpt = None,
        platform: PlatformOpt = None,
        tp: TpOpt = 1,
        gpu: GpuOpt = None,
        ep: EpOpt = None,
        dp_attention: DpAttOpt = False,
        output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the report to this file.")] = None,
        endpoint: EndpointOpt = None,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress line on stderr.")] = False,
    ) -> None:
        """Check a checkpoint against one or more framework releases."""
        from ckptlint.deployment import Deployment
        from ckptlint.engine import check as run_check
        from ckptlint.findings import Severity
        from ckptlint.reader import NotACheckpoint
        from ckptlint.rules import get_rule

        targets = _targets(target)
        selected = None
        if select:
            selected = set()
            for s in select:
                r = get_rule(s)
                if r is None:
                    _usage_error(f"unknown rule code or name {s!r} (see `ckptlint rules`)")
                selected.add(r.code)
        from ckptlint.deployment_cli import validate

        gpu, ep = validate(gpu, tp, ep)
        dep = Deployment(speculative=speculative, platform=platform.value if platform else None, tp=tp,
                         gpu=gpu, ep=ep, dp_attention=dp_attention)
        try:
            from ckptlint.reader import open_path

            report = run_check(open_path(path, endpoint=endpoint, progress=not quiet), targets, dep, selected)  # type: ignore[arg-type]
        except NotACheckpoint as exc:
            _usage_error(str(exc))
        if format is Format.json:
            from ckptlint.render.json_out import render
        else:
            from ckptlint.render.text import render
        text = render(report)
        if output:
            from ckptlint.fsutil import atomic_write

            atomic_write(output, text.encode('utf-8'))
        else:
            sys.stdout.write(text)
        threshold = Severity(fail_on.value).rank
        failing = any(f.severity.rank >= threshold for f in report.findings)
        raise typer.Exit(EXIT_FINDINGS if failing else EXIT_OK)

    @app.command()
    def plan(
        path: Annotated[str, typer.Argument(help="Checkpoint directory.")],
        target: Annotated[str, typer.Option("--target", "-t", help="FRAMEWORK==VERSION")],
        module: Annotated[Optional[str], typer.Option("--module", "-m", help="Only runtime modules containing this text.")] = None,
        format: Annotated[Format, typer.Option("--format", "-f")] = Format.text,
        speculative: SpecOpt = None,
        platform: PlatformOpt = None,
        tp: TpOpt = 1,
        gpu: GpuOpt = None,
        ep: EpOpt = None,
        dp_attention: DpAttOpt = False,
        endpoint: EndpointOpt = None,
    ) -> None:
        """Show the per-module load plan of one target: runtime module, decision, reason, stored form."""
        from ckptlint.deployment import Deployment
        from ckptlint.reader import NotACheckpoint, load_checkpoint
        from ckptlint.render.plan import render_plan
        from ckptlint.simulate import simulate

        targets = _targets([target])
        if len(targets) != 1:
            _usage_error("plan needs exactly one release: FRAMEWORK==VERSION")
        try:
            ckpt = load_checkpoint(path, endpoint=endpoint)
        except NotACheckpoint as exc:
            _usage_error(str(exc))
        if ckpt.config is None:
            _usage_error(f"{path}: no readable config.json, nothing to simulate")
        from ckptlint.deployment_cli import validate

        gpu, ep = validate(gpu, tp, ep)
        dep = Deployment(speculative=speculative, platform=platform.value if platform else None, tp=tp,
                         gpu=gpu, ep=ep, dp_attention=dp_attention)
        p = simulate(ckpt, targets[0], dep)
        sys.stdout.write(render_plan(p, module, json_out=format is Format.json))

    @app.command()
    def fix(
        path: Annotated[str, typer.Argument(help="Checkpoint directory.")],
        target: Annotated[str, typer.Option("--target", "-t", help="FRAMEWORK==VERSION (one target per call)")],
        write: Annotated[bool, typer.Option("--write", help="Apply the change (atomically) instead of printing it.")] = False,
        backup: Annotated[bool, typer.Option("--backup/--no-backup", help="Keep the original as <file>.orig.")] = True,
        speculative: SpecOpt = None,
        platform: PlatformOpt = None,
        tp: TpOpt = 1,
    ) -> None:
        """Print (or --write) the minimal skip-list addition that makes TARGET load the checkpoint."""
        from ckptlint.deployment import Deployment
        from ckptlint.fix import plan_fix, write_fix
        from ckptlint.reader import NotACheckpoint

        targets = _targets([target])
        if len(targets) != 1:
            _usage_error("fix takes exactly one release: FRAMEWORK==VERSION")
        dep = Deployment(speculative=speculative, platform=platform.value if platform else None, tp=tp)
        try:
            fp = plan_fix(path, targets[0], dep)
        except NotACheckpoint as exc:
            _usage_error(str(exc))
        if fp.diff:
            sys.stdout.write(fp.diff)
            if write:
                for note in write_fix(path, fp, backup=backup):
                    typer.echo(f"ckptlint: {note}", err=True)
                typer.echo(f"ckptlint: added {len(fp.added)} entr{'y' if len(fp.added) == 1 else 'ies'} to "
                           f"{'.'.join(fp.key_path)} in {fp.file}", err=True)
        elif not fp.not_fixable:
            typer.echo(f"ckptlint: nothing to fix for {targets[0].id}", err=True)
        for f, why in fp.not_fixable:
            typer.echo(f"not fixable by config: {f.code} {f.module or f.file}: {why}", err=True)
        for f in fp.remaining:
            typer.echo(f"still failing after the change: {f.code} {f.module}: {f.message}", err=True)
        for f in fp.regressions:
            typer.echo(f"warning: the change gives {f.target} a new load error: {f.code} {f.module}", err=True)
        raise typer.Exit(EXIT_FINDINGS if (fp.not_fixable or fp.remaining) else EXIT_OK)

    @app.command()
    def targets(format: Annotated[Format, typer.Option("--format", "-f")] = Format.text) -> None:
        """List the verified framework releases (target data files)."""
        import json

        from ckptlint.targets import list_targets

        ts = list_targets()
        if format is Format.json:
            sys.stdout.write(json.dumps([{"target": t.id, "extends": t.data.extends, "released": t.data.released,
                                          "summary": t.data.summary,
                                          "sources": [s.model_dump() for s in t.data.sources]} for t in ts],
                                        indent=2) + "\n")
            return
        for t in ts:
            first = t.data.summary.split(". ")[0].rstrip(".")
            sys.stdout.write(f"{t.id:<16} {t.data.released or '':<11} {first}.\n")

    @app.command()
    def rules(format: Annotated[Format, typer.Option("--format", "-f")] = Format.text) -> None:
        """List every rule."""
        import json

        from ckptlint.rules import ALL_RULES

        if format is Format.json:
            sys.stdout.write(json.dumps([{"code": r.code, "name": r.name, "summary": r.summary,
                                          "scope": r.scope, "consequences": [c.value for c in r.consequences]}
                                         for r in ALL_RULES], indent=2) + "\n")
            return
        for r in ALL_RULES:
            sys.stdout.write(f"{r.code}  {r.name:<34} {r.summary}\n")

    @app.command()
    def rule(code: Annotated[str, typer.Argument(help="Rule code or name, e.g. QD401.")]) -> None:
        """Show a rule's documentation."""
        from ckptlint.rules import get_rule

        r = get_rule(code)
        if r is None:
            _usage_error(f"unknown rule {code!r} (see `ckptlint rules`)")
        sys.stdout.write(f"# {r.name} ({r.code})\n\n{r.summary.rstrip('.')}.\n\n")
        for title, body in r.doc_sections().items():
            sys.stdout.write(f"## {title}\n{body}\n\n")

    from ckptlint.deployment_cli import register as _register_deployment

    _register_deployment(app)
    return app


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        from ckptlint import __version__

        sys.stdout.write(f"ckptlint {__version__}\n")
        raise SystemExit(EXIT_OK)
    debug = "--debug" in args
    if debug:
        args = [a for a in args if a != "--debug"]
    try:
        app = _build_app()
        app(args=args, prog_name="ckptlint", standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("ckptlint: interrupted\n")
        raise SystemExit(130)
    except Exception as exc:  # a bug: never a raw traceback unless asked for
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"ckptlint: internal error: {type(exc).__name__}: {exc}\n"
                         "This is a bug in ckptlint; please report it with the command line "
                         "(rerun with --debug for the traceback).\n")
        raise SystemExit(EXIT_INTERNAL)
