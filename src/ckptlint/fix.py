"""``ckptlint fix``: the minimal skip-list change that makes the per-module decisions of one or more
releases (a range, or ``-t`` given several times) match what the checkpoint stores, as one edit.

Only additions are made, in the form the method reads, to the file the target reads
(``config.json``'s ``quantization_config`` when present, else ``hf_quant_config.json``): entries
appended to a list, or ``"-:<regex>": {}`` members added to a GPTQ ``dynamic`` object (before the first
existing rule that matches the module, since the first matching rule decides). A value of
another type is never replaced (the fix is refused with a message instead). The edit is textual
(ckptlint.jsonedit): every byte outside it -- line endings, number formatting, escapes, key order --
stays as it was, and the edited text must parse to exactly the intended document. The result is
verified before it is offered: the edited config must raise no new CF finding, no release it is
for may have a load-error / silent-corruption finding left that an entry can fix, and no release
(those it is for, and the other default targets) may get a new load error from the added entries. :func:`write_fix` documents how it is written.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ckptlint import jsonedit, jsonlimits, userregex
from ckptlint.deployment import Deployment
from ckptlint.engine import check_loaded
from ckptlint.findings import Finding
from ckptlint.jsonedit import EditError
from ckptlint.reader import load_checkpoint
from ckptlint.targets import Target, newest_targets
from ckptlint.verdict import verdicts

SERIOUS = ("load-error", "silent-corruption")


@dataclass
class FixPlan:
    file: str | None = None  # relative to the checkpoint root
    key_path: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    diff: str = ""
    new_text: str | None = None
    original: bytes | None = None  # the bytes of ``file`` the edit was made from
    not_fixable: list[tuple[Finding, str]] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    regressions: list[Finding] = field(default_factory=list)
    # The re-check of the edited config: (release, verdict label) for each release the fix is for
    # (``after``) and for the other default releases it must not break (``rechecked``).
    after: list[tuple[str, str]] = field(default_factory=list)
    rechecked: list[tuple[str, str]] = field(default_factory=list)


def plan_fix(path: str, target: "Target | list[Target]", deployment: Deployment | None = None,
             others: list[Target] | None = None) -> FixPlan:
    """The one edit that makes every release in ``target`` (one release, or several: ``fix`` over a
    range, or ``-t`` given more than once) load the checkpoint, as far as a skip-list addition can.

    Each release's serious findings are triaged (:func:`_triage`); the releases that need entries must
    read the same key of the same file (else the findings of the ones that differ from the first are
    "not fixable": one edit cannot serve both, unless the verified edit resolves them anyway, as
    when it adds the key such a release reads before its fallback); the entries they need are
    merged and the edit verified on every
    release of the set: entries a release does not apply are dropped unless another release needs
    them, and a new load error on any release of the set or on ``others`` (default: the newest release
    of each framework) is a regression."""
    targets = list(target) if isinstance(target, (list, tuple)) else [target]
    deployment = deployment or Deployment()
    ckpt = load_checkpoint(path)
    # the config's regexes: a fresh time budget per check, and the `dynamic` rules of an edit matched in the
    # scope of the check it follows (as the check matched them)
    regexes = userregex.RegexScope()
    report = check_loaded(ckpt, targets, deployment, regexes=regexes)
    out = FixPlan()
    out.not_fixable += [(f, f.message.removeprefix(f"{f.file}: ") + " (ckptlint edits only a config file it can read)")
                        for f in report.findings if f.target is None and f.code in ("CF302", "CF303")
                        and f.consequence.value in SERIOUS]
    per = {t.id: _triage(report.findings, t, out) for t in targets}
    where: dict[str, tuple[str, str]] = {}
    method_keys: list[str] = []
    deferred: list[tuple[Finding, str]] = []  # findings of releases that read another key or file
    for t in targets:
        plan = report.plans.get(t.id)
        if not per[t.id] or plan is None or plan.quant is None:
            continue
        source = plan.quant.source_file
        key = plan.exclude_key or (plan.method.exclude_keys_hf_quant_config if source == "hf_quant_config.json"
                                   and plan.method.exclude_keys_hf_quant_config else plan.method.exclude_keys)[0]
        if where and (source, key) != next(iter(where.values())):
            first_id, (fsrc, fkey) = next(iter(where.items()))
            # (unless the edit for the first changes what this release reads too: checked once verified)
            deferred += [(f, f"{t.id} reads `{key}` in {source}, {first_id} reads `{fkey}` in {fsrc}: one edit "
                             f"cannot serve both; run `ckptlint fix -t {t.id}` on its own")
                         for f, _ in per[t.id]]
            continue
        if not where:
            method_keys = plan.method.exclude_keys
        where[t.id] = (source, key)
    suggestions = [s for tid in where for s in per[tid]]
    if not suggestions:
        return _flush(out, deferred)
    source, key = next(iter(where.values()))
    text = ckpt.texts.get(source)
    if text is None:
        text = (Path(path) / source).read_bytes().decode("utf-8")
    try:
        edit = _Edit(text, source, key, method_keys, regexes)
    except jsonlimits.JsonLimitError as exc:  # (the check reported it already; never edited)
        out.not_fixable += [(f, f"{source} is {exc.message}: ckptlint does not edit it") for f, _ in suggestions]
        return _flush(out, deferred)
    refusal = edit.refusal()
    if refusal:
        out.not_fixable += [(f, refusal) for f, _ in suggestions]
        return _flush(out, deferred)
    known_config = {(f.code, f.message) for f in report.findings if f.code.startswith("CF")}
    by_id = {t.id: t for t in targets}
    # Verify against the releases; findings an entry does not resolve (the release ignores the skip list
    # for that module, e.g. a compressed-tensors FusedMoE on vLLM 0.11) become "not fixable" and their
    # entries are dropped (unless another release's finding needs them), then the edit is rebuilt.
    for _ in range(3):
        additions = list(dict.fromkeys(e for _, entries in suggestions for e in entries))
        try:
            doc, new_text, added = edit.apply(additions)
        except EditError as exc:
            out.not_fixable += [(f, f"ckptlint cannot edit {source} minimally ({exc}); add the entries by hand")
                                for f, _ in suggestions]
            return _flush(out, deferred)
        edited = copy.copy(ckpt)
        if source == "config.json":
            edited.config = doc
        else:
            edited.hf_quant_config = doc
        edit.regexes = userregex.RegexScope()  # the next attempt's rules are matched as this check matches them
        after = check_loaded(edited, targets, deployment, regexes=edit.regexes)
        broken = [f for f in after.findings if f.code.startswith("CF") and (f.code, f.message) not in known_config]
        if broken:  # the frameworks would no longer read the edited config as intended
            out.not_fixable += [(f, f"the edited {source} would fail {broken[0].code}: {broken[0].message}")
                                for f, _ in suggestions]
            return _flush(out, deferred)
        remaining = [f for f in after.findings if f.target in where and f.consequence.value in SERIOUS
                     and f.code == "QD401" and f.data.get("direction") == "unquantized-into-quantized"]
        stuck_modules = {(f.target, m) for f in remaining for m in _modules(f)}
        stuck = [(f, e) for f, e in suggestions if any((f.target, m) in stuck_modules for m in _modules(f))]
        if not stuck:
            break
        for f, _ in stuck:
            t = by_id.get(f.target)
            out.not_fixable.append((f, f"no `{edit.key}` entry makes {t.resolved if t else f.target} build this "
                                       "module unquantized (it does not apply the skip list to it)"))
        suggestions = [(f, e) for f, e in suggestions if (f, e) not in stuck]
        if not suggestions:
            return _flush(out, deferred)
    out.remaining = remaining
    # A release that reads another key may still be served: the edit can change what it reads (SGLang 0.5.23's
    # ModelOpt config.json form reads `ignore` once present, before its `exclude_modules` fallback). Its
    # findings stay "not fixable" only where the verified edit leaves them.
    still = _serious_modules(after.findings)
    out.not_fixable += [(f, why) for f, why in deferred if any((f.target, f.code, m) in still for m in _modules(f))]
    out.file, out.added, out.new_text, out.original = source, added, new_text, text.encode("utf-8")
    out.key_path = [edit.section, edit.key]
    out.diff = "".join(difflib.unified_diff(text.splitlines(True), new_text.splitlines(True),
                                            f"a/{source}", f"b/{source}"))
    out.after = [(v.target, v.label) for v in verdicts(after)]
    resolved = {t.resolved for t in targets}
    others = [t for t in (others if others is not None else newest_targets()) if t.resolved not in resolved]
    out.regressions = _regressions(report, after)
    if others:
        before_o, after_o = check_loaded(ckpt, others, deployment), check_loaded(edited, others, deployment)
        out.regressions += _regressions(before_o, after_o)
        out.rechecked = [(v.target, v.label) for v in verdicts(after_o)]
    return out


def _flush(out: FixPlan, deferred: list[tuple[Finding, str]]) -> FixPlan:
    out.not_fixable += deferred
    return out


def _modules(f: Finding) -> list:
    """The modules a finding covers (an aggregated one lists them in its data)."""
    return f.data.get("modules") or [f.module]


def _serious_modules(findings: list[Finding]) -> set[tuple]:
    """(release, code, module) of every serious finding: one index, looked up per deferred finding."""
    return {(g.target, g.code, m) for g in findings if g.consequence.value in SERIOUS for m in _modules(g)}


def _triage(findings: list[Finding], target: Target, out: FixPlan) -> list[tuple[Finding, list[str]]]:
    """The target's serious findings a skip-list addition can fix, with the entries to add; the rest
    go to ``out.not_fixable`` with the reason."""
    suggestions: list[tuple[Finding, list[str]]] = []
    for f in findings:
        if f.target != target.id or f.consequence.value not in SERIOUS:
            continue
        if f.code == "QD401" and f.data.get("not_fixable"):
            out.not_fixable.append((f, f.data["not_fixable"]))
        elif f.code == "QD401" and f.data.get("direction") == "unquantized-into-quantized":
            suggestions.append((f, list(f.data.get("suggested_entries", []))))
        elif f.code == "QD401":
            out.not_fixable.append((f, f"needs `{f.data.get('matched_entry')}` removed from the skip list, or the "
                                       "module stored unquantized; ckptlint only appends entries"
                                    if f.data.get("matched_entry") else "the target never quantizes this module"))
        elif f.data.get("server_flag"):
            out.not_fixable.append((f, f"fixed by a server flag, not by the config: start the server with "
                                       f"{f.data['server_flag']}"))
        else:
            out.not_fixable.append((f, "not a skip-list problem (missing or mis-shaped tensors, or an "
                                       "unsupported target): a config change cannot fix it"))
    return suggestions


def _regressions(before, after) -> list[Finding]:
    """Load errors the edited checkpoint has (report ``after``) that the original (``before``) did not."""
    seen = {(f.target, f.code, f.module) for f in before.findings if f.consequence.value == "load-error"}
    return [f for f in after.findings if f.consequence.value == "load-error" and (f.target, f.code, f.module) not in seen]


class _Edit:
    """The skip-list addition in the form the method reads: entries appended to a list, or for GPTQ
    ``dynamic`` (``-:`` keys of an object) ``"-:<regex>": {}`` members. An existing value of
    another type is never replaced (``null`` counts as absent, as the frameworks read it)."""

    def __init__(self, text: str, source: str, key: str, method_keys: list[str],
                 regexes: userregex.RegexScope | None = None) -> None:
        self.text, self.source = text, source
        # the scope of the check the edit follows: its `dynamic` rules are matched in it
        self.regexes = regexes if regexes is not None else userregex.RegexScope()
        self.section = "quantization_config" if source == "config.json" else "quantization"
        self.dynamic = key == "dynamic" and "dynamic" in method_keys
        self.key = "dynamic" if self.dynamic else key
        self.doc = jsonlimits.loads(text)  # (the same limits as the check; a refusal is an EditError)

    def refusal(self) -> str | None:
        section = self.doc.get(self.section) if isinstance(self.doc, dict) else None
        if not isinstance(section, dict):
            return f"`{self.section}` in {self.source} is not an object: ckptlint cannot add to it"
        current = section.get(self.key)
        want = dict if self.dynamic else list
        if current is None or isinstance(current, want):
            return None
        return (f"`{self.section}.{self.key}` in {self.source} is {_kind(current)}, not {_kind(want())}: ckptlint "
                "only adds entries and never replaces a value of another type; fix it by hand")

    def apply(self, additions: list[str]) -> tuple[dict, str, list[str]]:
        """(the edited document, its text, the entries added as they appear in the file)."""
        doc = copy.deepcopy(self.doc)
        section = doc[self.section]
        before = None
        if self.dynamic:
            current = section.get(self.key) or {}
            keys = [_dynamic_key(e) for e in additions]
            added = [k for k in dict.fromkeys(keys) if k not in current]
            # The first rule that matches decides (get_dynamic_override): the new `-:` rules go before the
            # first existing rule that matches a module they are for, else at the end.
            rules = list(current)
            first = min((i for i, k in enumerate(rules) if isinstance(k, str) and any(
                _rule_matches(k, e, self.regexes) for e in additions)), default=len(rules))
            before = rules[first] if first < len(rules) else None
            merged = {**{k: current[k] for k in rules[:first]}, **{k: {} for k in added},
                      **{k: current[k] for k in rules[first:]}}
            section[self.key] = merged
            items: list = [(k, "{}") for k in added]
        else:
            current = section.get(self.key) or []
            added = [e for e in additions if e not in current]
            section[self.key] = current + added
            items = [json.dumps(e, ensure_ascii=False) for e in added]
        new_text = jsonedit.extend(self.text, [self.section], self.key, items,
                                   "object" if self.dynamic else "array", before=before)
        jsonedit.check(new_text, doc)
        if self.dynamic and list(jsonlimits.loads(new_text)[self.section][self.key]) != list(section[self.key]):
            raise EditError("the edited `dynamic` rules are not in the intended order")
        return doc, new_text, added


def _dynamic_key(entry: str) -> str:
    # A skip-list entry as a GPTQModel negative `dynamic` rule (re.match on the module name): an exact
    # name becomes its escaped, end-anchored regex.
    return "-:" + (entry[3:] if entry.startswith("re:") else re.escape(entry) + "$")


def _rule_matches(rule: str, name: str, regexes: userregex.RegexScope) -> bool:
    # A GPTQModel `dynamic` key (`-:`/`+:`/bare regex) re.match'ed against a module name (not a `re:` entry).
    if name.startswith("re:"):
        return False
    rx = regexes.compile(rule[2:] if rule[:2] in ("-:", "+:") else rule)
    return rx is not None and rx.match(name) is not None


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


# --- writing ---------------------------------------------------------------------------------------
# `fix --write` promises: the file is replaced whole or not at all; "original saved" is true; a
# read-only file is not written unless forced; two runs at once do not lose an edit; a run killed at
# any point leaves the file and its .orig whole, and at most a temporary file named
# `.<file>.ckptlint-<pid>.tmp` (or `.<file>.orig.ckptlint-<pid>.tmp`), which the next `fix --write`
# on that file removes once no process <pid> is running.

LOCK_WAIT_S = 10.0
_TEMP = re.compile(r"^\.(?P<name>.+)\.ckptlint-(?P<pid>[0-9]+)\.tmp$")


class FixRefused(Exception):
    """``fix --write`` will not write (read-only file, changed file, ...): a usage error (exit 2)."""


def refuse_write_target(path: str) -> str | None:
    """Why ``fix --write`` cannot write to ``path`` at all (checked before anything is read)."""
    if path.startswith("hf://"):
        return (f"fix --write edits files on disk and {path} is a Hugging Face Hub repository; run "
                "`ckptlint fix` without --write to see the change, and apply it in a clone of the repository")
    return None


def write_fix(path: str, fix: FixPlan, backup: bool = True, force: bool = False) -> list[str]:
    """Apply ``fix``: keep the original as ``<file>.orig``, then replace the file atomically. Returns
    notes for the user; raises FixRefused (nothing written) or OSError."""
    assert fix.file is not None and fix.new_text is not None
    dest = Path(path) / fix.file
    st = os.stat(dest)  # a symbolic link (the Hub cache layout) is replaced by the file, not followed
    if not force and (not st.st_mode & 0o222 or not os.access(dest, os.W_OK)):
        raise FixRefused(f"it is read-only (mode {stat.S_IMODE(st.st_mode):04o}); pass --force to write it anyway")
    notes = [f"removed {name}, left by an interrupted ckptlint run" for name in _remove_stale_temps(dest)]
    with _locked(dest):
        current = dest.read_bytes()
        if fix.original is not None and current != fix.original:
            raise FixRefused(f"{fix.file} changed after ckptlint read it (another program or ckptlint run wrote "
                             "it); run fix again")
        if backup:
            notes.append(_save_original(dest, current, st))
        _replace(dest, fix.new_text.encode("utf-8"), st)
    return notes


def _remove_stale_temps(dest: Path) -> list[str]:
    removed = []
    try:
        names = os.listdir(dest.parent)
    except OSError:
        return removed
    for name in sorted(names):
        m = _TEMP.match(name)
        if m is None or m["name"] not in (dest.name, dest.name + ".orig"):
            continue
        pid = int(m["pid"])
        if pid != os.getpid() and _running(pid):
            continue  # a run in progress (the lock keeps it apart from this one)
        p = dest.parent / name
        try:
            if stat.S_ISREG(os.lstat(p).st_mode):
                os.unlink(p)
                removed.append(name)
        except OSError:
            pass
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # someone else's process, or unknowable: keep its file
    return True


@contextlib.contextmanager
def _locked(dest: Path) -> Iterator[None]:
    """An exclusive lock on the file being replaced, for runs of ckptlint at once (POSIX flock; a
    file system without locks, or Windows, still gets the changed-since-read check)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(dest, os.O_RDONLY)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise FixRefused(f"another ckptlint fix has been writing {dest.name} for "
                                     f"{LOCK_WAIT_S:.0f} s; try again") from None
                time.sleep(0.05)
            except OSError:
                break  # no locks on this file system
        yield
    finally:
        os.close(fd)  # releases the lock


def _save_original(dest: Path, current: bytes, st: os.stat_result) -> str:
    """Create ``<file>.orig`` exclusively and completely (a hard link to a finished temporary file,
    which fails if it exists), then compare what it holds with what was read."""
    orig = dest.with_name(dest.name + ".orig")
    tmp = _write_temp(dest.parent, orig.name, current, st)
    try:
        try:
            os.link(tmp, orig)
            created = True
        except FileExistsError:
            created = False
        except OSError:  # no hard links here: exclusive create, removed again if the write fails
            created = _create_exclusive(orig, current, st)
    finally:
        _unlink(tmp)
    try:
        kept_st = os.lstat(orig)
    except OSError as exc:
        raise FixRefused(f"{orig.name} cannot be read back ({exc.strerror or exc})") from None
    if not stat.S_ISREG(kept_st.st_mode):
        raise FixRefused(f"{orig.name} exists and is not a regular file; remove it or pass --no-backup")
    kept = orig.read_bytes()
    if created:
        if kept != current:
            raise FixRefused(f"{orig.name} does not hold what was read from {dest.name}; nothing was written")
        return f"original saved as {orig.name}"
    if kept == current:
        return f"original already saved as {orig.name}"
    return f"kept the existing {orig.name} (it is the older original)"


def _create_exclusive(p: Path, data: bytes, st: os.stat_result) -> bool:
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(st.st_mode))
    except FileExistsError:
        return False
    try:
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        _unlink(p)
        raise
    os.close(fd)
    return True


def _replace(dest: Path, data: bytes, st: os.stat_result) -> None:
    tmp = _write_temp(dest.parent, dest.name, data, st)
    try:
        os.replace(tmp, dest)
    except BaseException:
        _unlink(tmp)
        raise
    try:  # make the rename itself durable
        dfd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _write_temp(directory: Path, name: str, data: bytes, st: os.stat_result) -> Path:
    """A finished, fsynced file ``.<name>.ckptlint-<pid>.tmp`` in ``directory`` with the mode (and,
    where permitted, the owner) of ``st``."""
    tmp = directory / f".{name}.ckptlint-{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:  # left by a killed run that had this pid
        _unlink(tmp)
        fd = os.open(tmp, flags, 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        if hasattr(os, "fchown") and os.geteuid() == 0:
            os.fchown(fd, st.st_uid, st.st_gid)
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        _unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass
