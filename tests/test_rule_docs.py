"""Rule documentation from the registry: `rules --format markdown`, `rule CODE`, and the README table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlint.rules import ALL_RULES
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- rules:start -->", "<!-- rules:end -->"


ckptlint = cli_run  # (exit code, stdout, stderr) of an in-process CLI call


def readme_table() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1, "README.md needs the rules markers once each"
    return text.split(START, 1)[1].split(END, 1)[0].lstrip("\n")


def test_readme_table_matches_registry(capsys):
    code, out, _ = ckptlint(capsys, "rules", "--format", "markdown")
    assert code == 0
    assert readme_table() == out, "README.md rule table is stale: run python scripts/update_readme_rules.py"


def test_readme_rules_section_is_last():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.index("\n## Rules\n") < text.index(START)
    assert text.rstrip().endswith(END)


def test_update_script_check_mode():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "update_readme_rules.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_update_script_rewrites_only_the_table(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("update_readme_rules", ROOT / "scripts" / "update_readme_rules.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    stale = f"# x\n\nintro\n\n## Rules\n\n{START}\n| old |\n{END}\n\ntrailer\n"
    new = mod.render(stale)
    assert new.startswith("# x\n\nintro\n\n## Rules\n\n" + START + "\n| Code |")
    assert new.endswith(f"{END}\n\ntrailer\n")
    assert mod.render(new) == new
    with pytest.raises(SystemExit):
        mod.render("no markers")


def test_markdown_table_rows(capsys):
    _, out, _ = ckptlint(capsys, "rules", "--format", "markdown")
    lines = out.splitlines()
    assert lines[0] == "| Code | Name | Summary | Consequences |"
    assert lines[1] == "|---|---|---|---|"
    rows = lines[2:]
    assert len(rows) == len(ALL_RULES)
    for r, row in zip(ALL_RULES, rows):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 4, row
        assert cells[0] == f"`{r.code}`" and cells[1] == f"`{r.name}`"
        assert cells[2] == r.summary.rstrip(".")
        for c in r.consequences:
            assert f"`{c.value}`" in cells[3]


def test_rules_text_and_json_still_work(capsys):
    code, out, _ = ckptlint(capsys, "rules")
    assert code == 0 and len(out.splitlines()) == len(ALL_RULES)
    code, out, _ = ckptlint(capsys, "rules", "--format", "json")
    assert code == 0 and [x["code"] for x in json.loads(out)] == [r.code for r in ALL_RULES]
    code, _, err = ckptlint(capsys, "rules", "--format", "xml")
    assert code == 2


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_command_for_every_rule(capsys, rule):
    for key in (rule.code, rule.name):
        code, out, _ = ckptlint(capsys, "rule", key)
        assert code == 0
        assert out.startswith(f"# {rule.name} ({rule.code})\n")
        assert "## What it does" in out
