"""Reports of a run over several checkpoints (``ckptlint check A B C…``): each checkpoint's own
report, in the order given, and one matrix checkpoint × release at the end (text) or at the top
(Markdown); JSON holds every report and the matrix; SARIF one run per checkpoint.

Matrix cells: ``ok`` loads, ``degr`` loads degraded, ``WRONG`` loads with wrong outputs, ``FAIL``
will not load, ``n/s`` the release does not support the architecture or quant method, ``?`` no verdict (not
simulated, a release newer than the target data, or a container-only check), ``-`` not
checked on that release; ``*`` marks a verdict that comes only from findings left out by
configuration or a baseline. A checkpoint that could not be checked shows its error instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ckptlint import __version__
from ckptlint.engine import SCHEMA_VERSION
from ckptlint.render.safe import clean, defuse_commands, dumps

if TYPE_CHECKING:
    from ckptlint.outcome import Outcome

SHORT = {"loads": "ok", "degraded": "degr", "wrong-outputs": "WRONG", "will-not-load": "FAIL", "not-supported": "n/s",
         "no-verdict": "?"}
LEGEND = ("ok loads, degr loads degraded, WRONG loads with wrong outputs, FAIL will not load, n/s not supported "
          "by the release, ? no verdict (not simulated, release newer than the data, or container only), "
          "- not checked; * only because of findings left out by configuration or baseline")
_PAINT = {"ok": "32", "degr": "33", "WRONG": "31", "FAIL": "31", "n/s": "2", "?": "33"}


def columns(outcomes: list["Outcome"]) -> list[str]:
    seen: dict[str, None] = {}
    for o in outcomes:
        for t in o.targets:
            seen.setdefault(t, None)
    return list(seen)


def cell(o: "Outcome", target: str) -> str:
    v = next((v for t, v in zip(o.targets, o.verdicts) if t == target), None)
    if v is None:
        return "-"
    return SHORT[v["verdict"]] + ("*" if v["accepted_by"] else "")


def text_matrix(outcomes: list["Outcome"], color: bool = False) -> list[str]:
    cols = columns(outcomes)
    names = [clean(o.path) for o in outcomes]
    w0 = max(len("checkpoint"), *(len(n) for n in names))
    widths = [max(5, len(t.partition("==")[2])) for t in cols]
    fw_row, ver_row = " " * w0, "checkpoint".ljust(w0)
    last_fw = None
    for t, w in zip(cols, widths):
        fw, _, ver = t.partition("==")
        fw_row += "  " + (fw if fw != last_fw else "").ljust(w)
        ver_row += "  " + ver.ljust(w)
        last_fw = fw
    lines = ["", f"{len(outcomes)} checkpoints \u00d7 {len(cols)} releases", fw_row.rstrip(), ver_row.rstrip()]
    for o, name in zip(outcomes, names):
        if o.error is not None:
            lines.append(f"{name.ljust(w0)}  error: {clean(o.error)}")
            continue
        row = name.ljust(w0)
        for t, w in zip(cols, widths):
            c = cell(o, t)
            pad = c.ljust(w)
            code = _PAINT.get(c.rstrip("*"))
            row += "  " + (f"\x1b[{code}m{c}\x1b[0m" + pad[len(c):] if color and code else pad)
        lines.append(row.rstrip())
    lines.append(f"({LEGEND})")
    return lines


def text(outcomes: list["Outcome"], color: bool = False, fmt: str = "text") -> str:
    parts = [o.outputs[fmt] if o.error is None else f"{clean(o.path)}: error: {clean(o.error)}\n" for o in outcomes]
    return "\n".join(parts) + defuse_commands("\n".join(text_matrix(outcomes, color))) + "\n"


def markdown_matrix(outcomes: list["Outcome"]) -> list[str]:
    from ckptlint.render.markdown import ICON, escape

    cols = columns(outcomes)
    lines = ["| checkpoint | " + " | ".join(f"`{t}`" for t in cols) + " |", "|---|" + "---|" * len(cols)]
    for o in outcomes:
        name = f"`{clean(o.path).replace('`', '')}`"
        if o.error is not None:
            lines.append(f"| {name} | " + escape("error: " + o.error) + " |" * len(cols))
            continue
        cells = []
        for t in cols:
            v = next((v for tt, v in zip(o.targets, o.verdicts) if tt == t), None)
            cells.append("-" if v is None else f"{ICON[v['verdict']]} {escape(v['label'])}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown(outcomes: list["Outcome"]) -> str:
    from ckptlint.render.markdown import escape

    failing = sum(1 for o in outcomes if o.failing or o.error is not None)
    lines = [f"## ckptlint: {len(outcomes)} checkpoints, {failing} failing", ""] + markdown_matrix(outcomes)
    for o in outcomes:
        lines.append("")
        if o.error is not None:
            lines += [f"### `{clean(o.path).replace('`', '')}`", "", escape("error: " + o.error)]
        else:
            lines.append(o.outputs["markdown"].rstrip("\n"))
    return "\n".join(lines) + "\n"


def json_doc(outcomes: list["Outcome"]) -> dict[str, Any]:
    reports: list[dict[str, Any]] = []
    for o in outcomes:
        reports.append(json.loads(o.outputs["json"]) if o.error is None else {"checkpoint": o.path, "error": o.error})
    return {"schema_version": SCHEMA_VERSION, "ckptlint_version": __version__, "reports": reports,
            "matrix": {o.path: ({t: v for t, v in zip(o.targets, o.verdicts)} if o.error is None else
                                {"error": o.error}) for o in outcomes}}


def render_json(outcomes: list["Outcome"]) -> str:
    return dumps(json_doc(outcomes), indent=2) + "\n"


def error_line(o: "Outcome") -> str:
    """``--format jsonl``: the line of a checkpoint that could not be checked."""
    return dumps({"schema_version": SCHEMA_VERSION, "checkpoint": o.path, "error": o.error},
                 separators=(",", ":")) + "\n"


def jsonl(outcomes: list["Outcome"]) -> str:
    return "".join(o.outputs["jsonl"] if o.error is None else error_line(o) for o in outcomes)


def github(outcomes: list["Outcome"]) -> str:
    from ckptlint.render.github import assemble

    texts = [o.outputs["github"] if o.error is None else f"{clean(o.path)}: error: {clean(o.error)}\n"
             for o in outcomes]
    return assemble([o.annotations for o in outcomes], texts + ["\n".join(text_matrix(outcomes)).lstrip("\n") + "\n"])


def concise(outcomes: list["Outcome"]) -> str:
    """Every checkpoint's lines, one after the other; one that could not be checked as one line."""
    return "".join(o.outputs["concise"] if o.error is None else f"{clean(o.path)}: error: {clean(o.error)}\n"
                   for o in outcomes)


def render(outcomes: list["Outcome"], fmt: str, color: bool = False) -> str:
    """The report of a run in format ``fmt``: one checkpoint's own report, or the combined one."""
    if len(outcomes) == 1 and outcomes[0].error is None:
        o = outcomes[0]
        if fmt == "github":
            from ckptlint.render.github import assemble

            return assemble([o.annotations], [o.outputs["github"]])
        return o.outputs[fmt]
    return {"json": render_json, "jsonl": jsonl, "sarif": sarif, "markdown": markdown,
            "github": github, "concise": concise}.get(fmt, lambda oo: text(oo, color))(outcomes)


def sarif(outcomes: list["Outcome"]) -> str:
    """One SARIF log, one run per checked checkpoint."""
    runs = [run for o in outcomes if o.error is None for run in json.loads(o.outputs["sarif"])["runs"]]
    first = next((json.loads(o.outputs["sarif"]) for o in outcomes if o.error is None), None)
    doc = {"$schema": first["$schema"], "version": first["version"], "runs": runs} if first else \
        {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": []}
    return dumps(doc, indent=2) + "\n"
