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


class CheckFormat(str, Enum):
    """``check`` also writes SARIF 2.1.0 and GitHub workflow-command annotations."""

    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class RulesFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"


class Platform(str, Enum):
    cuda = "cuda"
    rocm = "rocm"


# Set by the console entry point (ckptlint._entry), which ends the process with os._exit: a report
# put here is never freed. Freeing a big checkpoint's report object by object, as the command's
# frame unwinds, costs ~15 ms at 92,000 tensors for nothing.
KEEP_UNTIL_EXIT: list | None = None


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


def _config(path: str | None, config_file: str | None, isolated: bool):
    """The configuration in effect (ckptlint.config); a bad file is a usage error."""
    from ckptlint.config import ConfigError, load

    import typer

    try:
        cfg = load(path, config_file, isolated)
    except ConfigError as exc:
        _usage_error(str(exc))
    for note in cfg.notes:  # which settings file is used, and a checkpoint's own one that is not
        typer.echo(f"ckptlint: {note}", err=True)
    return cfg


def _deployment(cfg, speculative: bool | None, platform, tp: int | None, gpu: str | None = None,
                ep: int | None = None, dp_attention: bool = False, no_fusion: bool = False):
    """Deployment options: command line first, then the configuration file, then the defaults."""
    from ckptlint.deployment import Deployment
    from ckptlint.deployment_cli import validate

    c = cfg.config
    tp = tp or c.tp or 1
    gpu, ep = validate(gpu, tp, ep)
    return Deployment(speculative=speculative if speculative is not None else c.speculative,
                      platform=platform.value if platform else c.platform, tp=tp, gpu=gpu, ep=ep,
                      dp_attention=dp_attention, shared_experts_fusion=False if no_fusion else None)


def _one_target(target: str | None, cfg, command: str):
    """The single release ``plan``/``fix`` work on: --target, else the config's ``target`` if it names one."""
    specs = [target] if target else (cfg.config.target or [])
    if not specs:
        _usage_error(f"{command} needs --target FRAMEWORK==VERSION")
    targets = _targets(specs)
    if len(targets) != 1:
        _usage_error(f"{command} takes exactly one release: FRAMEWORK==VERSION")
    return targets[0]


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
        help="MTP speculative decoding with the checkpoint's own MTP layer (default: on when config.json declares one). "
        "Findings about the MTP layer (missing or mis-stored MTP weights, MT7xx, and the draft model's modules) exist "
        "only with it on; --no-speculative checks the serving setup without speculative decoding.")]
    PlatformOpt = Annotated[Optional[Platform], typer.Option("--platform", help="cuda or rocm (default: the quant format's native platform).")]
    TpOpt = Annotated[Optional[int], typer.Option("--tp", min=1, help="Tensor-parallel size (default 1).")]
    GpuOpt = Annotated[Optional[str], typer.Option("--gpu", help="GPU to assume (`ckptlint gpus`; default: the format's native GPU).")]
    EpOpt = Annotated[Optional[int], typer.Option("--ep", min=1, help="Expert-parallel size (divides --tp; default 1).")]
    DpAttOpt = Annotated[bool, typer.Option("--dp-attention", help="Data-parallel attention: attention projections whole on every rank.")]
    NoFusionOpt = Annotated[bool, typer.Option(
        "--disable-shared-experts-fusion",
        help="Assume SGLang runs with --disable-shared-experts-fusion (default: its own default for the model and GPU).")]
    ConfigOpt = Annotated[Optional[str], typer.Option(
        "--config", help="Use this configuration file (ckptlint.toml, or pyproject.toml with [tool.ckptlint]) "
        "instead of looking next to the checkpoint, then in the current directory.")]
    IsolatedOpt = Annotated[bool, typer.Option("--isolated", help="Ignore all configuration files.")]
    EndpointOpt = Annotated[Optional[str], typer.Option(
        "--endpoint", help="Hub URL for hf://ORG/REPO[@REVISION] paths (default: $HF_ENDPOINT or https://huggingface.co).")]

    @app.command()
    def check(
        path: Annotated[str, typer.Argument(help="Checkpoint directory, .safetensors file, or hf://ORG/REPO[@REVISION].")],
        target: TargetOpt = None,
        format: Annotated[CheckFormat, typer.Option("--format", "-f", help="Output format: text, json, sarif (SARIF 2.1.0) or github (workflow-command annotations, then the text report).")] = CheckFormat.text,
        fail_on: Annotated[Optional[FailOn], typer.Option("--fail-on", help="Lowest severity that makes the exit code 1 (default error).")] = None,
        select: Annotated[Optional[list[str]], typer.Option("--select", help="Only these rules: codes, prefixes (QD, QD4), names or ALL; replaces the config's select.")] = None,
        ignore: Annotated[Optional[list[str]], typer.Option("--ignore", help="Drop these rules (codes, prefixes, names).")] = None,
        extend_select: Annotated[Optional[list[str]], typer.Option("--extend-select", help="Add these rules to the selection.")] = None,
        speculative: SpecOpt = None,
        platform: PlatformOpt = None,
        tp: TpOpt = None,
        gpu: GpuOpt = None,
        ep: EpOpt = None,
        dp_attention: DpAttOpt = False,
        disable_shared_experts_fusion: NoFusionOpt = False,
        output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the report to this file.")] = None,
        config: ConfigOpt = None,
        isolated: IsolatedOpt = False,
        baseline: Annotated[Optional[str], typer.Option("--baseline", help="Drop findings recorded in this baseline file (report only new ones).")] = None,
        write_baseline: Annotated[Optional[str], typer.Option("--write-baseline", help="Record the current findings' fingerprints in this file and exit 0.")] = None,
        endpoint: EndpointOpt = None,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress line on stderr.")] = False,
    ) -> None:
        """Check a checkpoint against one or more framework releases."""
        import contextlib

        from ckptlint.reader import NotACheckpoint, Source, open_path

        try:
            src = open_path(path, endpoint=endpoint, progress=not quiet)
        except NotACheckpoint as exc:
            _usage_error(str(exc))
        # A source starts reading shard headers in the background now, while the rest is set up.
        with src if isinstance(src, Source) else contextlib.nullcontext(src):
            from ckptlint import baseline as bl
            from ckptlint import selection as sel
            from ckptlint.engine import check as run_check
            from ckptlint.findings import Severity

            cfg = _config(path, config, isolated)
            try:
                selection = sel.build([cfg.selection_layer(), sel.Layer(
                    select=sel.split_flags(select), extend_select=sel.split_flags(extend_select) or (),
                    ignore=sel.split_flags(ignore) or ())], cfg.ignore_rules())
                known = bl.load(baseline) if baseline else None
            except (sel.SelectorError, bl.BaselineError) as exc:
                _usage_error(str(exc))
            targets = _targets(target or cfg.config.target)
            dep = _deployment(cfg, speculative, platform, tp, gpu, ep, dp_attention, disable_shared_experts_fusion)
            try:
                report = run_check(src, targets, dep)  # type: ignore[arg-type]
            except NotACheckpoint as exc:
                _usage_error(str(exc))
            if KEEP_UNTIL_EXIT is not None:
                KEEP_UNTIL_EXIT.append(report)
            report.config_file = str(cfg.path) if cfg.path else None
            sel.apply_selection(report, selection)
            if write_baseline:
                try:
                    n = bl.write(write_baseline, report.findings)
                except bl.BaselineError as exc:
                    _usage_error(str(exc))
                typer.echo(f"ckptlint: wrote {n} fingerprint(s) to {write_baseline}", err=True)
            if known is not None:
                bl.apply_baseline(report, known)
            dropped = ([f"{report.ignored['by_config']} by rule selection and ignores"
                        + (f" ({cfg.label})" if cfg.path else "")] if report.ignored["by_config"] else []) \
                + ([f"{report.ignored['by_baseline']} by baseline {baseline}"] if report.ignored["by_baseline"] else [])
            if dropped:
                typer.echo(f"ckptlint: finding(s) ignored: {', '.join(dropped)}", err=True)
            if format is CheckFormat.json:
                from ckptlint.render.json_out import render
            elif format is CheckFormat.sarif:
                from ckptlint.render.sarif import render
            elif format is CheckFormat.github:
                from ckptlint.render.github import render
            else:
                from ckptlint.render.text import render
            text = render(report)
            if output:
                from ckptlint.fsutil import write_output

                try:
                    write_output(output, text.encode("utf-8"))
                except OSError as exc:
                    _usage_error(f"cannot write {output}: {exc.strerror or exc}")
            else:
                sys.stdout.write(text)
            threshold = Severity(fail_on.value if fail_on else (cfg.config.fail_on or "error")).rank
            failing = any(f.severity.rank >= threshold for f in report.findings) and not write_baseline
            raise typer.Exit(EXIT_FINDINGS if failing else EXIT_OK)

    @app.command()
    def plan(
        path: Annotated[str, typer.Argument(help="Checkpoint directory.")],
        target: Annotated[Optional[str], typer.Option("--target", "-t", help="FRAMEWORK==VERSION (default: the config's target if it names one release)")] = None,
        module: Annotated[Optional[str], typer.Option("--module", "-m", help="Only runtime modules containing this text.")] = None,
        format: Annotated[Format, typer.Option("--format", "-f")] = Format.text,
        speculative: SpecOpt = None,
        platform: PlatformOpt = None,
        tp: TpOpt = None,
        gpu: GpuOpt = None,
        ep: EpOpt = None,
        dp_attention: DpAttOpt = False,
        disable_shared_experts_fusion: NoFusionOpt = False,
        config: ConfigOpt = None,
        isolated: IsolatedOpt = False,
        endpoint: EndpointOpt = None,
    ) -> None:
        """Show the per-module load plan of one target: runtime module, decision, reason, stored form."""
        from ckptlint.reader import NotACheckpoint, load_checkpoint
        from ckptlint.render.plan import render_plan
        from ckptlint.simulate import simulate

        cfg = _config(path, config, isolated)
        targets = [_one_target(target, cfg, "plan")]
        try:
            ckpt = load_checkpoint(path, endpoint=endpoint)
        except NotACheckpoint as exc:
            _usage_error(str(exc))
        if ckpt.config is None:
            _usage_error(f"{path}: no readable config.json, nothing to simulate")
        dep = _deployment(cfg, speculative, platform, tp, gpu, ep, dp_attention, disable_shared_experts_fusion)
        p = simulate(ckpt, targets[0], dep)
        sys.stdout.write(render_plan(p, module, json_out=format is Format.json))

    @app.command()
    def fix(
        path: Annotated[str, typer.Argument(help="Checkpoint directory.")],
        target: Annotated[Optional[str], typer.Option("--target", "-t", help="FRAMEWORK==VERSION (one target per call; default: the config's target if it names one release)")] = None,
        write: Annotated[bool, typer.Option("--write", help="Apply the change (atomically) instead of printing it.")] = False,
        backup: Annotated[bool, typer.Option("--backup/--no-backup", help="Keep the original as <file>.orig.")] = True,
        force: Annotated[bool, typer.Option("--force", help="With --write: write a file that is read-only.")] = False,
        speculative: SpecOpt = None,
        platform: PlatformOpt = None,
        tp: TpOpt = None,
        gpu: GpuOpt = None,
        ep: EpOpt = None,
        disable_shared_experts_fusion: NoFusionOpt = False,
        config: ConfigOpt = None,
        isolated: IsolatedOpt = False,
    ) -> None:
        """Print (or --write) the minimal skip-list addition that makes TARGET load the checkpoint."""
        from ckptlint.fix import FixRefused, plan_fix, refuse_write_target, write_fix
        from ckptlint.reader import NotACheckpoint

        refusal = refuse_write_target(path) if write else None
        if refusal:
            _usage_error(refusal)
        cfg = _config(path, config, isolated)
        targets = [_one_target(target, cfg, "fix")]
        dep = _deployment(cfg, speculative, platform, tp, gpu, ep, no_fusion=disable_shared_experts_fusion)
        try:
            fp = plan_fix(path, targets[0], dep)
        except NotACheckpoint as exc:
            _usage_error(str(exc))
        if fp.diff:
            sys.stdout.write(fp.diff)
            if write:
                try:
                    notes = write_fix(path, fp, backup=backup, force=force)
                except FixRefused as exc:
                    _usage_error(f"cannot write {fp.file} in {path}: {exc}; {fp.file} was not changed")
                except OSError as exc:
                    _usage_error(f"cannot write {fp.file} in {path}: {exc.strerror or exc}; {fp.file} was not changed")
                for note in notes:
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
                                          "sources": [dict(s) if isinstance(s, dict) else s.model_dump() for s in t.data.sources]} for t in ts],
                                        indent=2) + "\n")
            return
        for t in ts:
            first = t.data.summary.split(". ")[0].rstrip(".")
            sys.stdout.write(f"{t.id:<16} {t.data.released or '':<11} {first}.\n")

    @app.command()
    def rules(format: Annotated[RulesFormat, typer.Option("--format", "-f")] = RulesFormat.text) -> None:
        """List every rule (markdown: the README's rule table)."""
        import json

        from ckptlint.rules import ALL_RULES

        if format is RulesFormat.markdown:
            from ckptlint.render.rules import markdown_table

            sys.stdout.write(markdown_table())
            return
        if format is RulesFormat.json:
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
