"""Where a finding is, in the checkpoint's text files: the line of a key or string value.

SARIF regions and GitHub annotations want a line in a text file, but stdlib ``json`` keeps no
positions. :class:`JsonLocator` finds them in the raw text the reader kept
(``Checkpoint.texts``), without a second parse per finding:

* A small text (``config.json``, ``hf_quant_config.json``, the index of a small checkpoint) is
  tokenized once, on the first lookup, and every key (by its path) and every string value (by the
  path of its container) is remembered with its offset. Lookups are then dictionary hits.
* A large text (the index of a 1,000,000-tensor checkpoint is ~100 MB) is never tokenized for a
  handful of lookups: each lookup is a C-speed ``str.find`` of the JSON-encoded string, checked to
  be a whole key (or value) and searched in path order, and memoized. After
  ``BULK_AFTER`` distinct lookups on the same text, one regex pass indexes every key and string
  value by name (about a second for 100 MB) and later lookups are dictionary hits. On a large text
  the path is matched in order but not by nesting: good enough for an index, whose keys below
  ``weight_map`` are unique tensor names.

Line numbers come from one cached table of line starts. Columns count Unicode code points (SARIF
``columnKind: unicodeCodePoints``); ``end_column`` is the column after the token, as SARIF's
``endColumn`` and GitHub's ``endColumn`` expect.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from pathlib import Path as _FsPath
from urllib.parse import quote
from dataclasses import dataclass, field
from typing import Sequence, Union

PathPart = Union[str, int]
Path = tuple[PathPart, ...]

SMALL_TEXT = 1 << 20  # characters: tokenize fully below this
BULK_AFTER = 48  # distinct lookups on a large text before indexing it whole

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]')
_STRING = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")([ \t\r\n]*:)?')
_WS = " \t\r\n"


@dataclass(frozen=True)
class Span:
    """A token's place in a text file: 1-based line and columns; ``end_column`` is exclusive."""

    line: int
    column: int
    end_column: int


def _decode(token: str) -> str:
    if "\\" not in token:
        return token[1:-1]
    try:
        return json.loads(token)
    except ValueError:
        return token[1:-1]


class JsonLocator:
    """Line numbers of keys and string values in one JSON text (scan once, cache)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.large = len(text) > SMALL_TEXT
        self._line_starts: list[int] | None = None
        self._keys: dict[Path, tuple[int, int]] | None = None  # path -> (offset, token length)
        self._values: dict[tuple[Path, str], tuple[int, int]] | None = None
        self._memo: dict[tuple, tuple[int, int] | None] = {}
        self._finds = 0
        self._bulk_keys: dict[str, tuple[int, int]] | None = None
        self._bulk_values: dict[str, tuple[int, int]] | None = None

    # ----------------------------------------------------------------------------- public

    def key(self, path: Sequence[PathPart]) -> Span | None:
        """The key at ``path`` (object keys, array indices as ints), e.g. ``("quantization_config", "exclude")``."""
        hit = self._key(tuple(path))
        return self._span(hit)

    def value(self, path: Sequence[PathPart], value: str) -> Span | None:
        """The string ``value`` inside the container at ``path``.

        For an array, an element equal to ``value``; for an object, the first member whose value
        is ``value`` (``value(("weight_map",), shard)``: the first tensor mapped to ``shard``); for
        a member path (``("quantization_config", "quant_method")``), that member's value.
        """
        hit = self._value(tuple(path), value)
        return self._span(hit)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts(), offset)

    # ---------------------------------------------------------------------------- lookups

    def _key(self, path: Path) -> tuple[int, int] | None:
        if not path:
            return None
        if not self.large:
            self._scan()
            assert self._keys is not None
            return self._keys.get(path)
        memo = ("k", path)
        if memo in self._memo:
            return self._memo[memo]
        name = path[-1]
        if not isinstance(name, str):
            hit = None
        elif self._bulk():
            assert self._bulk_keys is not None
            hit = self._bulk_keys.get(name)
        else:
            start = 0
            if len(path) > 1:
                parent = self._key(path[:-1])
                if parent is None:
                    self._memo[memo] = None
                    return None
                start = parent[0] + parent[1]
            hit = self._find(name, start, want_key=True)
        self._memo[memo] = hit
        return hit

    def _value(self, path: Path, value: str) -> tuple[int, int] | None:
        if not self.large:
            self._scan()
            assert self._values is not None
            return self._values.get((path, value))
        memo = ("v", path, value)
        if memo in self._memo:
            return self._memo[memo]
        if self._bulk():
            assert self._bulk_values is not None
            hit = self._bulk_values.get(value)
        else:
            start = 0
            if path:
                parent = self._key(path)
                if parent is None:
                    self._memo[memo] = None
                    return None
                start = parent[0] + parent[1]
            hit = self._find(value, start, want_key=False)
        self._memo[memo] = hit
        return hit

    def _find(self, s: str, start: int, *, want_key: bool) -> tuple[int, int] | None:
        """First whole string token ``s`` at or after ``start`` that is a key (or is not)."""
        self._finds += 1
        text = self.text
        needles = [json.dumps(s, ensure_ascii=False)]
        ascii_form = json.dumps(s)
        if ascii_form != needles[0]:
            needles.append(ascii_form)
        for needle in needles:
            pos = start
            while True:
                at = text.find(needle, pos)
                if at < 0:
                    break
                pos = at + 1
                if not self._starts_token(at):
                    continue
                after = at + len(needle)
                while after < len(text) and text[after] in _WS:
                    after += 1
                is_key = after < len(text) and text[after] == ":"
                if is_key == want_key:
                    return at, len(needle)
        return None

    def _starts_token(self, at: int) -> bool:
        """Is the quote at ``at`` the opening quote of a string token (as far as the neighbours tell)?"""
        text = self.text
        i = at - 1
        while i >= 0 and text[i] in _WS:
            i -= 1
        if i >= 0 and text[i] not in "{[,:":
            return False
        # An escaped quote inside a string is preceded by an odd run of backslashes.
        j, n = at - 1, 0
        while j >= 0 and text[j] == "\\":
            n += 1
            j -= 1
        return n % 2 == 0

    # ------------------------------------------------------------------------------ scans

    def _bulk(self) -> bool:
        """Index a large text by name once it has cost ``BULK_AFTER`` finds."""
        if self._bulk_keys is not None:
            return True
        if self._finds < BULK_AFTER:
            return False
        keys: dict[str, tuple[int, int]] = {}
        values: dict[str, tuple[int, int]] = {}
        for m in _STRING.finditer(self.text):
            tok = m.group(1)
            (keys if m.group(2) else values).setdefault(_decode(tok), (m.start(), len(tok)))
        self._bulk_keys, self._bulk_values = keys, values
        return True

    def _scan(self) -> None:
        """Tokenize the whole (small) text once, tracking the path of every token."""
        if self._keys is not None:
            return
        keys: dict[Path, tuple[int, int]] = {}
        values: dict[tuple[Path, str], tuple[int, int]] = {}
        # frame: [is_object, path, current key or element index, expecting a key]
        stack: list[list] = []
        for m in _TOKEN.finditer(self.text):
            tok = m.group()
            c = tok[0]
            top = stack[-1] if stack else None
            if c == '"':
                s = _decode(tok)
                hit = (m.start(), len(tok))
                if top is None:
                    values.setdefault(((), s), hit)
                elif top[0] and top[3]:
                    top[2] = s
                    top[3] = False
                    keys[top[1] + (s,)] = hit  # a repeated key: the later one is the one in effect
                elif top[0]:
                    values.setdefault((top[1] + (top[2],), s), hit)
                    values.setdefault((top[1], s), hit)
                else:
                    values.setdefault((top[1], s), hit)
            elif c == "{" or c == "[":
                child: Path = () if top is None else top[1] + (top[2],)
                stack.append([c == "{", child, None if c == "{" else 0, c == "{"])
            elif c == "}" or c == "]":
                if stack:
                    stack.pop()
            elif c == ",":
                if top is not None:
                    if top[0]:
                        top[3] = True
                    else:
                        top[2] += 1
        self._keys, self._values = keys, values

    def _starts(self) -> list[int]:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        return self._line_starts

    def _span(self, hit: tuple[int, int] | None) -> Span | None:
        if hit is None:
            return None
        offset, length = hit
        line = self.line_of(offset)
        col = offset - self._starts()[line - 1] + 1
        return Span(line, col, col + length)


@dataclass
class Locators:
    """One :class:`JsonLocator` per text file of a checkpoint, built on first use."""

    texts: dict[str, str]
    _by_file: dict[str, JsonLocator] = field(default_factory=dict)

    def get(self, file: str) -> JsonLocator | None:
        loc = self._by_file.get(file)
        if loc is None:
            text = self.texts.get(file)
            if text is None:
                return None
            loc = self._by_file[file] = JsonLocator(text)
        return loc

    def key(self, file: str, path: Sequence[PathPart]) -> Span | None:
        loc = self.get(file)
        return loc.key(path) if loc else None

    def value(self, file: str, path: Sequence[PathPart], value: str) -> Span | None:
        loc = self.get(file)
        return loc.value(path, value) if loc else None


# ------------------------------------------------------------------------- finding anchors

CONFIG = "config.json"
HF_QUANT_CONFIG = "hf_quant_config.json"
INDEX = "model.safetensors.index.json"

_AT_LINE = re.compile(r"at line (\d+) column (\d+)")
_QC_PATH = re.compile(r"`(quantization_config|quantization)((?:\.[A-Za-z0-9_\-]+)*)`")


@dataclass
class Anchor:
    """Where a finding points: a file relative to the checkpoint root, and a line in it if known.

    ``related`` are further files (relative to the root), e.g. the shard that holds the tensor
    whose index line is the primary location.
    """

    file: str | None
    span: Span | None = None
    related: list[str] = field(default_factory=list)


def _quant_section(file: str) -> tuple[str, ...]:
    return ("quantization",) if file == HF_QUANT_CONFIG else ("quantization_config",)


def anchor(report, f, locs: Locators) -> Anchor:
    """The text-file line a finding is about (``report`` is an ``engine.Report``, ``f`` a ``Finding``).

    In order: a parse error's own position; for skip-list findings (QD401, QD402) the failed or
    matched entry in the skip list, else the skip-list key, else the quantization section; for
    MT701 the ``num_nextn_predict_layers`` (or equivalent) key; for target-support findings the
    ``architectures`` or ``quant_method`` key; for config findings the key they name; for
    index-level findings the index key; for a tensor listed in the index its ``weight_map`` line;
    for a shard the first ``weight_map`` entry mapped to it; else the finding's file with no line.
    """
    plan = report.plans.get(f.target) if f.target else None
    shard_related = [f.file] if f.file and f.file.endswith(".safetensors") else []
    for rule in (_parse_error, _skip_list, _mtp_count, _target_support, _config_key, _index_key, _tensor_line):
        found = rule(report, f, locs, plan, shard_related)
        if found is not None:
            return found
    if f.file:
        return Anchor(f.file)
    if f.tensors and report.checkpoint.tensors.get(f.tensors[0]) is not None:
        return Anchor(report.checkpoint.tensors[f.tensors[0]].file)
    return Anchor(CONFIG if CONFIG in report.checkpoint.texts else None)


def _parse_error(report, f, locs: Locators, plan, related) -> Anchor | None:
    if f.file in (CONFIG, HF_QUANT_CONFIG, INDEX) and f.code in ("CF302", "IX201"):
        m = _AT_LINE.search(f.message)
        if m:
            line, col = int(m.group(1)), int(m.group(2))
            return Anchor(f.file, Span(line, col, col + 1))
        return Anchor(f.file)
    return None


def _skip_list(report, f, locs: Locators, plan, related) -> Anchor | None:
    if f.code not in ("QD401", "QD402") or plan is None or plan.quant is None:
        return None
    src = plan.quant.source_file
    section = _quant_section(src)
    key = plan.exclude_key
    entries = list(f.data.get("failed_entries") or [])
    if f.data.get("matched_entry"):
        entries.insert(0, f.data["matched_entry"])
    span = None
    if key:
        for e in entries:
            span = locs.value(src, section + (key,), e)
            if span:
                break
        span = span or locs.key(src, section + (key,))
    span = span or locs.key(src, section)
    return Anchor(src, span, related) if span else None


def _mtp_count(report, f, locs: Locators, plan, related) -> Anchor | None:
    if f.code != "MT701":
        return None
    cfg = report.checkpoint.config or {}
    draft = (plan.draft if plan is not None and plan.draft is not None else
             plan.arch.draft if plan is not None and plan.arch is not None else None)
    keys = list(draft.count_keys) if draft is not None else []
    keys += ["num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"]
    for k in keys:
        if k in cfg:
            return Anchor(CONFIG, locs.key(CONFIG, (k,)))
    return Anchor(CONFIG)


def _target_support(report, f, locs: Locators, plan, related) -> Anchor | None:
    if f.code in ("TG601", "TG603", "TG604", "TG605"):
        if "quantization method" in f.message or "quant method" in f.message:
            src = plan.quant.source_file if plan is not None and plan.quant is not None else CONFIG
            sec = _quant_section(src)
            span = locs.key(src, sec + ("quant_method",)) or locs.key(src, sec)
            if span:
                return Anchor(src, span)
        return Anchor(CONFIG, locs.key(CONFIG, ("architectures",)) or locs.key(CONFIG, ("model_type",)))
    if f.code == "TG602":
        return Anchor(CONFIG if CONFIG in report.checkpoint.texts else None)
    return None


def _config_key(report, f, locs: Locators, plan, related) -> Anchor | None:
    if f.file not in (CONFIG, HF_QUANT_CONFIG):
        return None
    span = None
    m = _QC_PATH.search(f.message)
    if m:
        path = (m.group(1),) + tuple(p for p in m.group(2).split(".") if p)
        while path and span is None:
            span = locs.key(f.file, path)
            path = path[:-1]
    for k in f.data.get("keys") or []:
        if span:
            break
        span = locs.key(f.file, tuple(k.split("."))) or locs.key(f.file, (k,))
    if span is None and f.code == "CF311":
        span = locs.key(f.file, _quant_section(f.file))
    return Anchor(f.file, span)


def _index_key(report, f, locs: Locators, plan, related) -> Anchor | None:
    if f.file != INDEX:
        return None
    span = None
    for t in f.tensors[:5]:
        span = locs.key(INDEX, ("weight_map", t))
        if span:
            break
    if span is None:
        for k in f.data.get("keys") or []:
            span = locs.key(INDEX, tuple(k.split(".")))
            if span:
                break
    if span is None:
        what = {"IX202": ("weight_map",), "IX208": ("metadata", "total_size"),
                "IX211": ("metadata", "total_size")}.get(f.code)
        if what:
            span = locs.key(INDEX, what) or locs.key(INDEX, what[:1])
    return Anchor(INDEX, span)


def _tensor_line(report, f, locs: Locators, plan, related) -> Anchor | None:
    """A tensor's ``weight_map`` line, else the first entry mapped to the finding's shard."""
    if INDEX not in report.checkpoint.texts:
        return None
    for t in f.tensors[:5]:
        span = locs.key(INDEX, ("weight_map", t))
        if span:
            return Anchor(INDEX, span, related)
    shard = f.data.get("shard") if isinstance(f.data.get("shard"), str) else f.file
    if shard and shard.endswith(".safetensors"):
        span = locs.value(INDEX, ("weight_map",), shard)
        if span:
            return Anchor(INDEX, span, related)
    return None


# ------------------------------------------------------------------------------ file paths


class ArtifactPaths:
    """Paths of the checkpoint's files as CI tools want them: relative to the current directory.

    GitHub code scanning and workflow annotations take paths relative to the repository root,
    which is the working directory of a workflow step, and ignore SARIF ``originalUriBaseIds``
    (github/codeql-action#2215). So a file under the current directory is written as a relative
    path from it (``models/glm5/config.json``); a checkpoint outside it (a Hugging Face cache
    directory) gets absolute ``file://`` URIs, a remote one (``hf://ORG/REPO``) URIs under that
    address, and neither gets an annotation path.
    """

    def __init__(self, root: str, cwd: str | None = None) -> None:
        self.remote = "://" in root  # hf://ORG/REPO[@REV]: nothing in the working tree
        if self.remote:
            self.abs_dir, self.inside, self.dir_rel = root.rstrip("/"), False, None
            return
        d = root if os.path.isdir(root) or not root.endswith(".safetensors") else (os.path.dirname(root) or ".")
        self.abs_dir = os.path.abspath(d)
        base = os.path.abspath(cwd or os.getcwd())
        try:
            rel = os.path.relpath(self.abs_dir, base)
        except ValueError:  # another drive (Windows)
            rel = None
        self.inside = rel is not None and rel != os.pardir and not rel.startswith(os.pardir + os.sep)
        self.dir_rel = ("" if rel == os.curdir else rel.replace(os.sep, "/") + "/") if self.inside else None

    @property
    def dir_uri(self) -> str:
        """The checkpoint directory: relative (may be empty: the current directory) or ``file://``."""
        if self.dir_rel is not None:
            return quote(self.dir_rel)
        if self.remote:
            return quote(self.abs_dir, safe=":/@") + "/"
        return _FsPath(self.abs_dir).as_uri().rstrip("/") + "/"

    def rel(self, file: str) -> str | None:
        """``file`` (relative to the checkpoint) relative to the current directory, or None if outside it."""
        return None if self.dir_rel is None else self.dir_rel + file

    def uri(self, file: str) -> str:
        return self.dir_uri + quote(file)
