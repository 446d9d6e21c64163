"""Command line: ``ckptlint check | upgrade | plan | fix | inspect | targets | rules | rule | gpus``.

One module per command (``check``, ``upgrade``, ``plan``, ``fix``, ``inspect_cmd``, and ``info`` for the listing
commands); what they share, the deployment and settings options among it, is in ``common``.

Exit codes: 0 no finding at or above ``--fail-on``; 1 findings at or above it; 2 usage error or
unusable input; 3 internal error (a bug: short message, traceback only with ``--debug``).
"""

import sys
from typing import Annotated

from ckptlint import __version__
from ckptlint.cli.common import (EXIT_CODES_HELP, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CheckFormat,
                                 FailOn, Format, Platform, RulesFormat, UsageError, help_command_class, to_typer)
from ckptlint.jsonlimits import allow_computed_digits

# the command line's public names
__all__ = ["EXIT_FINDINGS", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "CheckFormat", "FailOn", "Format", "Platform",
           "RulesFormat", "UsageError", "build_app", "main"]


# Examples shown at the end of a command's --help ("\b": click keeps the lines as they are).
EXAMPLES = {
    "check": [
        "ckptlint check ./ckpt                                  (the newest SGLang and vLLM release)",
        "ckptlint check ./ckpt -t sglang==0.5.15 -t 'vllm>=0.24'",
        "ckptlint check hf://org/model@main -f json -o report.json",
        "ckptlint check a b c -f github --report sarif:ckptlint.sarif   (CI: annotations + SARIF)",
        "ckptlint check ./ckpt --write-baseline base.json   (then: --baseline base.json)",
        "ckptlint check ./ckpt --gpu h100 --tp 8 --no-speculative",
    ],
    "fix": [
        "ckptlint fix ./ckpt -t sglang==0.5.15                  (print the change; exit 1: pending)",
        "ckptlint fix ./ckpt -t 'vllm>=0.24' -t 'sglang>=0.5.12' --write",
    ],
}


def _epilog(name: str) -> str:
    parts = []
    if name in EXAMPLES:
        parts.append("\b\nExamples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name]))
    if name == "check":
        parts.append(EXIT_CODES_HELP)
    return "\n\n".join(parts)


def build_app():
    import typer

    from ckptlint.cli import check, fix, info, inspect_cmd, plan, upgrade

    app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                      add_completion=False,
                      help="Predict whether a quantized LLM checkpoint will load (or load wrong) on a given "
                           "SGLang or vLLM release, from config.json and safetensors headers alone.",
                      epilog="\b\nExit codes: 0 ok, 1 findings (or a release with no verdict), 2 usage error, "
                             "3 internal error.\nckptlint COMMAND --help for each command's options and examples.")

    @app.callback()
    def _global(
        version: Annotated[bool, typer.Option("--version", "-V", help="Print the version and exit.")] = False,
        debug: Annotated[bool, typer.Option("--debug", help="On an internal error (exit 3), print the traceback.")] = False,
    ) -> None:
        """(--version and --debug are read by main before the command line reaches typer.)"""
        if version:
            typer.echo(f"ckptlint {__version__}")
            raise typer.Exit(EXIT_OK)

    cls = help_command_class()
    for command in (check.check, upgrade.upgrade, plan.plan, fix.fix, info.targets, info.rules, info.rule,
                    info.gpus, inspect_cmd.inspect):
        app.command(cls=cls, epilog=_epilog(command.__name__) or None)(to_typer(command))
    return app


_build_app = build_app  # the name tests and tools used before the split


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        sys.stdout.write(f"ckptlint {__version__}\n")
        raise SystemExit(EXIT_OK)
    allow_computed_digits()
    debug = "--debug" in args
    if debug:
        args = [a for a in args if a != "--debug"]
    try:
        if args[:1] == ["check"] and _check_directly(args[1:]):
            return
        app = build_app()
        app(args=args, prog_name="ckptlint", standalone_mode=True)
    except SystemExit:
        raise
    except UsageError as exc:
        from ckptlint.render.safe import clean

        sys.stderr.write(f"ckptlint: error: {clean(str(exc))}\n")
        raise SystemExit(EXIT_USAGE)
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


def _check_directly(args: list[str]) -> bool:
    """Run ``ckptlint check ARGS`` without typer when :mod:`ckptlint.cli.argv` reads ARGS as typer
    would (False: it does not, and the typer app runs the command line). What click's standalone
    mode does around a command is done here too: an interrupt prints "Aborted!" and exits 1, a
    closed output pipe exits 1."""
    from ckptlint.cli import argv, check

    kwargs = argv.parse(check.check, args)
    if kwargs is None:
        return False
    try:
        check.check(**kwargs)
    except (EOFError, KeyboardInterrupt):
        sys.stderr.write("\nAborted!\n")
        sys.stderr.flush()
        raise SystemExit(1)
    except OSError as exc:
        import errno

        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = _Pacified(sys.stdout)
        sys.stderr = _Pacified(sys.stderr)
        raise SystemExit(1)
    raise SystemExit(EXIT_OK)  # (check itself always exits with its code)


class _Pacified:
    """A stream whose flush ignores a closed pipe (as click's PacifyFlushWrapper, after EPIPE)."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            import errno

            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str):
        return getattr(self.wrapped, name)
