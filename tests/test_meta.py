"""Registry and documentation invariants."""

from __future__ import annotations

import re

from ckptlint.rules import ALL_RULES
from ckptlint.rules.base import DOC_SECTIONS, ReaderRule
from test_rules import RULE_CASES


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


def test_every_simulation_rule_has_failing_and_passing_cases():
    simulated = {r.code for r in ALL_RULES if not issubclass(r, ReaderRule)}
    assert simulated == RULE_CASES
