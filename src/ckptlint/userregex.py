"""Regular expressions that a checkpoint's config supplies, matched with Python's ``re`` under a bound.

Skip-list ``re:`` entries, compressed-tensors ``re:`` targets, GPTQ ``dynamic`` keys and ModelOpt
globs (whose regex metacharacters pass through) are run by the frameworks with Python's ``re`` on
every module name. A hostile or careless one -- ``re:([a-z_.0-9]+)*X`` -- backtracks for minutes on
one name. ckptlint matches them with the same engine, so that every pattern that finishes gives the
frameworks' answer, and so that one that does not finish is a finding about the framework too (it
stalls on the same names at start-up), not a guess from a different engine:

* **Linear patterns run as they are.** The pattern is parsed (``re._parser``, the parser ``re``
  itself uses) and its worst case bounded (:func:`is_linear`): repeats only over choice-free bodies,
  at most one repeat that multiplies the ways to go on (a repeat followed by a character it cannot
  match, like ``\\d+\\.``, does not), no repeat after that one, no backreference, at most
  ``MAX_BRANCHES`` ways through the alternations: a backtracking match then costs O(branches x
  pattern length x name length). A trailing repeat (``re:.*lm_head.*``) is free under ``re.match``.
  Almost every real entry is of this kind and pays nothing over a plain ``re.match``.
* **Any other pattern runs under a deadline**: a one-shot ``SIGALRM`` timer (``signal.setitimer``)
  interrupts ``re`` (which checks for signals while it backtracks) when the pattern has used up its
  budget. The first ``FREE_CALL_S`` of each call are free; time beyond that is charged to the
  pattern (``PATTERN_BUDGET_S``) and to all patterns together (``TOTAL_BUDGET_S``). A pattern out of
  budget is **undecided**: it matches nothing from then on, and :meth:`RegexScope.undecided` reports it
  (rule CF312). Where no timer is available (not the main thread, no ``SIGALRM`` as on Windows, or the
  program uses ``SIGALRM`` itself) such a pattern is undecided without being run.

The state (compiled patterns, budgets, undecided names) lives in a :class:`RegexScope`, one per
check, shared by every target of that check and passed explicitly to whatever compiles a pattern
(the quant-config parser, the skip-list matchers). There is no scope per process: what the
simulation learned is handed on as :meth:`RegexScope.undecided` (a frozen snapshot the Plan
carries, read by rule CF312).
"""

from __future__ import annotations

import os
import re
import signal
import threading
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple

PATTERN_BUDGET_S = 1.0  # charged time after which one pattern is undecided
TOTAL_BUDGET_S = 3.0  # charged time after which every guarded pattern is undecided
FREE_CALL_S = 100e-6  # per call, not charged: a guarded pattern averaging less than this is fine
MAX_BRANCHES = 64  # ways through a linear pattern's alternations
MAX_NAMES = 5  # undecided names kept per pattern


# --- static bound ---------------------------------------------------------------------------------
# A backtracking match does, at each pattern position, work times the number of times the position
# is reached. A variable-length repeat does O(name) work per reach and -- unless it is possessive, or
# its character set is disjoint from the character that must follow it, so only one of its lengths
# can get past that character -- multiplies the reaches of what follows by up to len(name) + 1.
# Walking the pattern with ``c`` = "a multiplying repeat came before" (0 or 1), the match is linear
# when every repeat is reached with c == 0 (so at most one multiplies), alternations multiply the
# reaches by at most MAX_BRANCHES, and repeats only hold choice-free bodies.

class _Ctx:
    def __init__(self, c: Any, nocase: bool) -> None:
        self.c, self.nocase, self.ways = c, nocase, 1


_CATEGORY_RX: dict[str, str] = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
                                "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _may_match(item: tuple[Any, Any], ch: str, x: _Ctx) -> bool:
    """Whether the single-character item can match ``ch`` (True when unsure)."""
    c = x.c
    op, av = item
    if op is c.LITERAL:
        return av == ord(ch)
    if op is c.NOT_LITERAL:
        return av != ord(ch)
    if op is not c.IN:
        return True
    negate, hit = False, False
    for sop, sav in av:
        if sop is c.NEGATE:
            negate = True
        elif sop is c.LITERAL:
            hit = hit or sav == ord(ch)
        elif sop is c.RANGE:
            hit = hit or sav[0] <= ord(ch) <= sav[1]
        elif sop is c.CATEGORY and str(sav) in _CATEGORY_RX:
            hit = hit or re.fullmatch(_CATEGORY_RX[str(sav)], ch) is not None
        else:
            return True
    return hit != negate


def _choice_free(items: Any, x: _Ctx) -> bool:
    c = x.c
    for op, av in items:
        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN, c.AT, c.CATEGORY):
            continue
        if op is c.SUBPATTERN and _choice_free(av[3], x):
            continue
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] == av[1] and _choice_free(av[2], x):
            continue
        return False
    return True


def _walk(items: Any, k: int, x: _Ctx) -> int | None:
    """``k`` after the sequence (see above), or None when its cost is not bounded here."""
    c = x.c
    for i, (op, av) in enumerate(items):
        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN, c.AT, c.CATEGORY):
            continue
        if op is c.SUBPATTERN:
            got = _walk(av[3], k, x)
        elif op is c.ATOMIC_GROUP:
            got = _walk(av, k, x)
        elif op in (c.ASSERT, c.ASSERT_NOT):  # a lookaround succeeds at most once: k unchanged after it
            got = k if _walk(av[1], k, x) is not None else None
        elif op is c.BRANCH:
            outs = [_walk(alt, k, x) for alt in av[1]]
            x.ways *= len(av[1])
            got = None if None in outs else max(outs)  # type: ignore[type-var]
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            lo, hi, body = av
            if lo == hi and _choice_free(body, x):
                got = k
            elif lo == hi and lo <= 16:  # a short fixed count: the body, that many times
                got = k
                for _ in range(lo):
                    got = _walk(body, got, x) if got is not None else None
            elif not _choice_free(body, x) or k:  # nested choices, or O(name) work reached O(name) times
                return None
            else:
                nxt = items[i + 1] if i + 1 < len(items) else None
                disjoint = (len(body) == 1 and nxt is not None and nxt[0] is c.LITERAL and not x.nocase
                            and not _may_match(body[0], chr(nxt[1]), x))
                got = 0 if op is c.POSSESSIVE_REPEAT or disjoint else 1
        else:  # backreferences, conditionals
            return None
        if got is None or x.ways > MAX_BRANCHES:
            return None
        k = got
    return k


_POSSESSIVE = re.compile(r"[*+?}]\+|\(\?>")


@lru_cache(maxsize=4096)
def is_linear(pattern: str, full: bool = False) -> bool:
    """Whether a backtracking ``re`` match of ``pattern`` costs at most O(pattern x name) on any name
    (see above). False when unsure."""
    if _POSSESSIVE.search(pattern):
        # possessive repeats and atomic groups: linear, but CPython 3.11's engine can fail inside
        # them (see _EngineFailure), which only the guarded match catches
        return False
    try:
        from re import _constants as c  # type: ignore[attr-defined]
        from re import _parser  # type: ignore[attr-defined]

        tree = _parser.parse(pattern, 0)
        items = list(tree)
        nocase = bool(tree.state.flags & (re.IGNORECASE | re.LOCALE)) or re.search(r"\(\?[a-zA-Z-]*i", pattern)
        x = _Ctx(c, bool(nocase))
        # re.match succeeds as soon as a trailing repeat is reached: it never backtracks into it.
        if items and not full and items[-1][0] in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) \
                and _choice_free(items[-1][1][2], x):
            items = items[:-1]
        return _walk(items, 0, x) is not None
    except Exception:  # not CPython 3.11+'s parser, or a tree it does not know: run under the deadline
        return False


# --- deadline -------------------------------------------------------------------------------------

class _Deadline(BaseException):
    """Raised by the SIGALRM handler inside a guarded match."""


_armed = False
_MAIN = threading.main_thread().ident
try:  # the C function: signal.getsignal converts its answer to an enum, which costs 10 µs a call
    from _signal import getsignal as _getsignal
except ImportError:  # pragma: no cover - other Python implementations
    _getsignal = signal.getsignal


def _on_alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise _Deadline()
    # Not our timer: do what the default action would have done.
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGALRM)


def _timer_available() -> bool:
    if not hasattr(signal, "setitimer") or threading.get_ident() != _MAIN:
        return False
    handler = _getsignal(signal.SIGALRM)
    if handler is _on_alarm:
        return True
    if handler not in (signal.SIG_DFL, None) or signal.getitimer(signal.ITIMER_REAL)[0]:
        return False  # the program uses SIGALRM itself
    signal.signal(signal.SIGALRM, _on_alarm)
    return True


class _EngineFailure(Exception):
    """Python's ``re`` raised inside a match (CPython 3.11's engine raises SystemError "The span of
    capturing group is wrong" for some possessive repeats around a capture group, e.g.
    ``(?:(a|b)|.)*+`` on ``a11``): the pattern's match is undecided, as it is for the framework."""


def _timed(fn: Callable[[str], Any], name: str, seconds: float) -> tuple[bool | None, float]:
    """(matched, seconds used); matched is None when the deadline interrupted the match. Raises
    :class:`_EngineFailure` when the regex engine itself fails."""
    global _armed
    try:
        _armed = True
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            hit = fn(name) is not None
        finally:
            left = signal.setitimer(signal.ITIMER_REAL, 0)[0]
            _armed = False
    except _Deadline:
        _armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        return None, seconds
    except (SystemError, RecursionError, MemoryError, RuntimeError) as exc:
        raise _EngineFailure(f"{type(exc).__name__}: {exc}") from None
    return hit, seconds - left


# --- the scope ------------------------------------------------------------------------------------

class UserRegex:
    """One config-supplied pattern, compiled in a :class:`RegexScope` (whose total budget it shares).
    ``match(name)`` is truthy when the pattern matches: on a linear pattern it *is* the compiled
    pattern's ``match`` (``fullmatch`` when ``full``), so the hot path costs what a plain ``re`` call
    costs; otherwise it is the guarded match (a bool). (A plain class: importing it is on every
    check's path.)"""

    def __init__(self, pattern: str, full: bool, linear: bool, scope: "RegexScope") -> None:
        self.pattern, self.full, self.linear = pattern, full, linear
        self.scope = scope
        self.spent = 0.0
        self.undecided_names: list[str] = []
        self.undecided_count = 0
        self.reason: str | None = None  # why it is undecided
        rx = re.compile(pattern)
        self._fn = rx.fullmatch if full else rx.match
        self.match: Callable[[str], Any] = self._fn if linear else self._guarded

    def _guarded(self, name: str) -> bool:
        if self.reason is not None:
            return self._undecided(name)
        if not _timer_available():
            self.reason = ("no timer here (not the main thread, or no SIGALRM on this platform), and "
                           "ckptlint does not run a regex it cannot bound")
            return self._undecided(name)
        scope = self.scope
        budget = min(PATTERN_BUDGET_S - self.spent, TOTAL_BUDGET_S - scope.spent)
        if budget <= 0.001:
            self.reason = f"out of time: {self.spent:.1f} s over many names"
            return self._undecided(name)
        try:
            hit, used = _timed(self._fn, name, budget + FREE_CALL_S)
        except _EngineFailure as exc:
            self.reason = f"Python's re module fails on it ({exc})"
            return self._undecided(name)
        charge = max(0.0, used - FREE_CALL_S)
        self.spent += charge
        scope.spent += charge
        if hit is None:
            self.reason = f"did not finish within {used:.1f} s"
            return self._undecided(name)
        return hit

    def _undecided(self, name: str) -> bool:
        if not self.undecided_count:
            self.scope._undecided[(self.pattern, self.full)] = None
        self.undecided_count += 1
        if len(self.undecided_names) < MAX_NAMES:
            self.undecided_names.append(name)
        return False


class RegexOutcome(NamedTuple):
    """What became of one pattern that was left undecided on some names (a snapshot: rule CF312)."""

    pattern: str
    full: bool
    reason: str | None
    undecided_names: tuple[str, ...]  # the first MAX_NAMES of them
    undecided_count: int


class RegexScope:
    """The config regexes of one check: the compiled patterns (each compiled once, shared by every
    target of the check) and the total time charged to them (``TOTAL_BUDGET_S``). Made by whoever
    runs a check (``engine.check_loaded``) and passed down explicitly."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.compiled: dict[tuple[str, bool], UserRegex | None] = {}
        self._undecided: dict[tuple[str, bool], None] = {}  # keys whose matcher was undecided on a name

    def compile(self, pattern: str, full: bool = False) -> UserRegex | None:
        """The bounded matcher of a config-supplied pattern; None when Python's ``re`` rejects it."""
        key = (pattern, full)
        compiled = self.compiled
        if key in compiled:
            return compiled[key]
        if len(compiled) >= 4096:
            compiled.clear()
        try:
            out: UserRegex | None = UserRegex(pattern, full, is_linear(pattern, full), self)
        except (re.error, RecursionError, OverflowError, ValueError):
            out = None
        compiled[key] = out
        return out

    def lookup(self, pattern: str, full: bool = False) -> UserRegex | None:
        """The matcher compiled for ``pattern`` in this scope, if any (nothing is compiled here)."""
        return self.compiled.get((pattern, full))

    def undecided(self) -> Mapping[tuple[str, bool], RegexOutcome]:
        """(pattern, full) -> outcome of every pattern of this scope left undecided on some name so
        far (the matcher :meth:`lookup` finds for it), as a read-only snapshot."""
        out: dict[tuple[str, bool], RegexOutcome] = {}
        for key in self._undecided:
            rx = self.compiled.get(key)
            if rx is not None and rx.undecided_count:
                out[key] = RegexOutcome(rx.pattern, rx.full, rx.reason, tuple(rx.undecided_names),
                                        rx.undecided_count)
        return MappingProxyType(out)

