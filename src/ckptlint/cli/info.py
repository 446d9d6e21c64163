"""The listing commands: ``ckptlint targets``, ``rules``, ``rule CODE`` and ``gpus``."""

import sys
from typing import Annotated

import typer

from ckptlint.cli.common import Format, RulesFormat, usage_error
from ckptlint.hardware import FORMAT_KEYS, architecture, gpu_data, support


def targets(format: Annotated[Format, typer.Option("--format", "-f")] = Format.text,
            coverage: Annotated[bool, typer.Option(
                "--coverage", help="Per release: registered architectures simulated from hand data, from "
                                   "extracted class facts, or generically, and how many have a draft class.")] = False,
            ) -> None:
    """List the verified framework releases (target data files)."""
    from ckptlint.targets import list_targets

    if coverage:
        _coverage(format)
        return

    ts = list_targets()
    if format is Format.json:
        import json

        sys.stdout.write(json.dumps([{"target": t.id, "extends": t.data.extends, "released": t.data.released,
                                      "summary": t.data.summary,
                                      "sources": [dict(s) if isinstance(s, dict) else s.model_dump() for s in t.data.sources]} for t in ts],
                                    indent=2) + "\n")
        return
    from ckptlint.render.text import default_width, wrap

    width = default_width()
    for t in ts:
        first = t.data.summary.split(". ")[0].rstrip(".")
        lead = f"{t.id:<16} {t.data.released or '':<11} "
        sys.stdout.write("\n".join(wrap(f"{first}.", width, lead, " " * len(lead))) + "\n")


def _coverage(format: Format) -> None:
    from ckptlint.targets import coverage as cov

    rows = cov.coverage()
    if format is Format.json:
        import json

        sys.stdout.write(json.dumps(rows, indent=2, sort_keys=True) + "\n")
        return
    sys.stdout.write(cov.text(rows))


def rules(format: Annotated[RulesFormat, typer.Option("--format", "-f")] = RulesFormat.text) -> None:
    """List every rule (markdown: the README's rule table)."""
    from ckptlint.rules import ALL_RULES

    if format is RulesFormat.markdown:
        from ckptlint.render.rules import markdown_table

        sys.stdout.write(markdown_table())
        return
    if format is RulesFormat.json:
        import json

        sys.stdout.write(json.dumps([{"code": r.code, "name": r.name, "summary": r.summary,
                                      "scope": r.scope, "consequences": [c.value for c in r.consequences]}
                                     for r in ALL_RULES], indent=2) + "\n")
        return
    for r in ALL_RULES:
        sys.stdout.write(f"{r.code}  {r.name:<34} {r.summary}\n")


def rule(code: Annotated[str, typer.Argument(help="Rule code or name, e.g. QD401.")]) -> None:
    """Show a rule's documentation."""
    from ckptlint.rules import get_rule

    r = get_rule(code)
    if r is None:
        usage_error(f"unknown rule {code!r} (see `ckptlint rules`)")
    sys.stdout.write(f"# {r.name} ({r.code})\n\n{r.summary.rstrip('.')}.\n\n")
    for title, body in r.doc_sections().items():
        sys.stdout.write(f"## {title}\n{body}\n\n")


def gpus(format: Annotated[Format, typer.Option("--format", "-f")] = Format.text) -> None:
    """List the GPUs ckptlint knows: architecture, memory, and which quant formats run there."""
    data = gpu_data()
    if format is Format.json:
        import json

        out = []
        for g in data.gpus.values():
            a = architecture(g)
            fmts = {f: {fw: (s.model_dump() if s else None) for fw in ("sglang", "vllm")
                        for s in [support(g, f, fw)]} for f in FORMAT_KEYS}
            out.append({**g.model_dump(), "memory_bytes": g.memory_bytes, "platform": a.platform,
                        "fp8_dtype": a.fp8_dtype, "architecture_source": a.source, "formats": fmts})
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    short = {"native": "yes", "fallback": "w-only", "emulated": "emul", "unsupported": "NO", "unknown": "?"}
    head = f"{'gpu':<14}{'arch':<8}{'memory':<16}" + "".join(f"{f:<15}" for f in FORMAT_KEYS)
    lines = [head, " " * 38 + "(sglang/vllm: yes native, w-only weight-only fallback, emul emulated, NO load error, ? unknown)"]
    for g in data.gpus.values():
        cells = []
        for f in FORMAT_KEYS:
            a, b = (support(g, f, fw) for fw in ("sglang", "vllm"))
            cells.append(f"{short[a.level] if a else '-'}/{short[b.level] if b else '-'}")
        mem = f"{g.memory:g} {g.memory_unit} {g.memory_kind}"
        lines.append(f"{g.key:<14}{g.architecture:<8}{mem:<16}" + "".join(f"{c:<15}" for c in cells))
    sys.stdout.write("\n".join(lines) + "\n")
