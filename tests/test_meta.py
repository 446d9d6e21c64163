"""Registry and documentation invariants."""

from __future__ import annotations

import re

from ckptlint.rules import ALL_RULES
from ckptlint.rules.base import DOC_SECTIONS
from casefiles import CASES_DIR, CODE_RE, discover, validate


def test_codes_and_names_are_unique_and_well_formed():
    codes = [r.code for r in ALL_RULES]
    names = [r.name for r in ALL_RULES]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    for r in ALL_RULES:
        assert re.fullmatch(r"[A-Z]{2}[0-9]{3}", r.code), r.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name), r.name
        assert r.summary.strip() and "\n" not in r.summary
        assert r.scope in ("checkpoint", "target")


def test_every_rule_documents_itself_in_order():
    for r in ALL_RULES:
        sections = r.doc_sections()
        present = [s for s in sections if s in DOC_SECTIONS]
        assert present == list(DOC_SECTIONS), f"{r.code}: {list(sections)}"
        for s in DOC_SECTIONS:
            assert sections[s].strip(), f"{r.code}: empty section {s}"


def test_every_rule_has_failing_and_passing_case_files():
    """Discovered from tests/cases/<CODE>/*.toml (run by test_cases.py): no hand-kept list."""
    cases = discover()
    for c in cases:
        validate(c)
    fires = {c.code for c in cases if c.fires}
    clean = {c.code for c in cases if not c.fires}
    codes = {r.code for r in ALL_RULES}
    assert codes - fires == set(), f"rules without a case where they fire: {sorted(codes - fires)}"
    assert codes - clean == set(), f"rules without a clean twin: {sorted(codes - clean)}"


def test_every_case_directory_names_a_rule_and_holds_only_cases():
    codes = {r.code for r in ALL_RULES}
    cases = {(c.code, c.name): c for c in discover()}
    for d in CASES_DIR.iterdir():
        if d.is_file():
            assert d.name == "README.md", f"unexpected file {d.name} in tests/cases/"
            continue
        assert CODE_RE.fullmatch(d.name) and d.name in codes, f"tests/cases/{d.name} names no rule"
        for f in d.iterdir():
            if f.name.endswith(".golden.json"):
                c = cases.get((d.name, f.name[:-len(".golden.json")]))
                assert c is not None and c.fires, f"{d.name}/{f.name}: a golden without a case that fires"
            else:
                assert f.suffix == ".toml", f"{d.name}/{f.name}: only <case>.toml and <case>.golden.json belong here"
