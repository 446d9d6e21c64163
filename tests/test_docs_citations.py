"""The project cites only its own docs or upstream sources, and every doc anchor it cites exists.

Someone who clones the repository must be able to follow every citation. Framework behaviour is
described in docs/frameworks/ (sglang.md, vllm.md, formats.md) and the project's decisions in
docs/decisions.md; code, data, docs and tests cite those (`docs/frameworks/sglang.md#quark-exclude-matching`)
or upstream files and PRs, never working notes that live outside the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Names of documents outside the repository (spelled in pieces so that this file does not cite them).
FORBIDDEN = tuple(
    "".join(parts)
    for parts in (
        ("DECISIONS", ".md"),
        ("sglang-", "loading.md"),
        ("vllm-", "loading.md"),
        ("checkpoint-", "formats.md"),
        ("../", "shared"),
        ("shared/", "reference"),
        ("shared/", "tools"),
    )
)

# Files allowed to cite outside documents while they wait to be converted (none now); a path listed here
# that no longer cites one (or no longer exists) fails the test, so the list only shrinks.
PY_NOT_YET_CONVERTED: tuple[str, ...] = ()

TEXT_SUFFIXES = {".py", ".md", ".toml", ".json", ".txt", ".yaml", ".yml", ".cfg", ".ini", ".sh", ".rst"}
SKIP_DIRS = {".venv", "__pycache__", ".git", ".pytest_cache", "node_modules"}


def _files(*roots: Path) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        if root.is_file():
            out.append(root)
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.suffix in TEXT_SUFFIXES and not SKIP_DIRS.intersection(p.parts):
                out.append(p)
    return out


def _checked_files() -> list[Path]:
    roots = [ROOT / "src", DOCS, ROOT / "tests", ROOT / "benchmarks", ROOT / "scripts", ROOT / "README.md"]
    return _files(*(r for r in roots if r.exists()))


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _outside_citations(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [f"{_rel(path)}:{n}: {line.strip()[:160]}"
            for n, line in enumerate(text.splitlines(), 1) if any(f in line for f in FORBIDDEN)]


def test_no_citation_of_documents_outside_the_repository():
    waiting = set(PY_NOT_YET_CONVERTED)
    bad = [hit for p in _checked_files() if _rel(p) not in waiting for hit in _outside_citations(p)]
    assert not bad, "cite docs/ or upstream instead:\n" + "\n".join(bad)


def test_unconverted_list_only_names_files_that_still_need_converting():
    stale = [p for p in PY_NOT_YET_CONVERTED if not (ROOT / p).is_file() or not _outside_citations(ROOT / p)]
    assert not stale, f"remove from PY_NOT_YET_CONVERTED (converted or gone): {stale}"


# --- doc anchors ----------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: inline markup and punctuation other than `-` and
    `_` dropped, lower-cased, spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # link text only
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in md.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m is None:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_github_slug_rules():
    assert github_slug("Quark exclude matching") == "quark-exclude-matching"
    assert github_slug("`is_layer_skipped` (vLLM 0.24+)") == "is_layer_skipped-vllm-024"
    assert github_slug("GLM-5 NextN") == "glm-5-nextn"
    assert github_slug("Qwen3.5 MTP") == "qwen35-mtp"
    assert github_slug("A [link](x.md) here") == "a-link-here"


def test_anchor_collection_counts_duplicates_and_skips_code(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("# Top\n## Same\n```\n# not a heading\n```\n## Same\n", encoding="utf-8")
    assert anchors(md) == {"top", "same", "same-1"}


# `docs/….md#anchor` anywhere, `name.md#anchor` naming a doc by its file name, or a relative Markdown
# link `(../decisions.md#…)` in a doc.
_DOC_REF = re.compile(r"(?<![\w/.-])((?:docs/)?(?:[\w.-]+/)*[\w.-]+\.md)#([\w-]+)")
# Markdown links: [text](target); `(#anchor)` points into the same file.
_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _docs_by_name() -> dict[str, list[Path]]:
    by: dict[str, list[Path]] = {}
    for p in DOCS.rglob("*.md"):
        by.setdefault(p.name, []).append(p)
    return by


def _resolve(ref: str, source: Path, by_name: dict[str, list[Path]]) -> Path | None:
    """The doc a reference names, or None when it names none of ours (another project's file)."""
    if ref.startswith("docs/"):
        return ROOT / ref
    if source.suffix == ".md":
        return (source.parent / ref).resolve()
    hits = by_name.get(Path(ref).name, [])
    return hits[0] if len(hits) == 1 else None


def test_every_cited_doc_anchor_exists():
    by_name = _docs_by_name()
    cache: dict[Path, set[str]] = {}
    bad: list[str] = []
    for src in _checked_files():
        text = src.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            refs = [(_resolve(m.group(1), src, by_name), m.group(1), m.group(2)) for m in _DOC_REF.finditer(line)]
            if src.suffix == ".md":
                refs += [(src, "", m.group(1)[1:]) for m in _MD_LINK.finditer(line) if m.group(1).startswith("#")]
            for doc, ref, frag in refs:
                if doc is None:
                    continue
                if not doc.is_file():
                    bad.append(f"{_rel(src)}:{n}: no such doc {ref}")
                elif frag not in cache.setdefault(doc, anchors(doc)):
                    bad.append(f"{_rel(src)}:{n}: {ref}#{frag} has no such heading in {_rel(doc)}")
    assert not bad, "\n".join(bad)


def test_relative_links_in_docs_point_at_existing_files():
    bad = []
    for md in _files(DOCS, ROOT / "README.md", ROOT / "benchmarks"):
        if md.suffix != ".md":
            continue
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            for m in _MD_LINK.finditer(line):
                target = m.group(1).partition("#")[0]
                if not target or "://" in target or target.startswith("mailto:"):
                    continue
                if not (md.parent / target).exists():
                    bad.append(f"{_rel(md)}:{n}: {target}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("doc", ["frameworks/sglang.md", "frameworks/vllm.md", "frameworks/formats.md", "decisions.md"])
def test_framework_docs_exist_with_anchors(doc):
    assert anchors(DOCS / doc), doc
