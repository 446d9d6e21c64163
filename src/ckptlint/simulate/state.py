"""The plan while the stages build it (mutable), and how it is frozen into a ``Plan``."""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace
from typing import Any

from ckptlint.simulate.model import Decision, Plan, RuntimeModule, Shard


class Building:
    """A runtime module while the stages build it."""

    __slots__ = ("name", "kind", "loader", "role", "shards", "decision", "fused_into")

    def __init__(self, name: str, kind: str, loader: str | None, role: str, shards: list[Shard] | None = None,
                 decision: Decision | None = None, fused_into: str | None = None) -> None:
        self.name, self.kind, self.loader = name, kind, loader
        self.role = role  # "main" | "draft" | "extra"
        self.shards = [] if shards is None else shards
        self.decision = decision
        self.fused_into = fused_into


_DEFAULTS = dict(Plan._field_defaults)


class State(SimpleNamespace):
    """A ``Plan`` under construction: the same fields, mutable; ``modules`` holds ``Building``
    records (keyed like the plan's) and ``built`` the frozen modules once the stages are done."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**{**_DEFAULTS, "modules": {}, "dropped": {}, "absent": {}, "assumptions": [], **kw})

    @property
    def simulated(self) -> bool:
        return self.unsupported is None and self.not_simulated is None and self.arch is not None


def _frozen(value: Any) -> Any:
    # only the plan's own containers: target data records are dict subclasses, read-only already
    t = type(value)
    if t is list:
        return tuple(value)
    if t is dict:
        return MappingProxyType(value)
    if t is set:
        return frozenset(value)
    return value


def freeze(state: State, modules: dict[str, RuntimeModule] | None = None) -> Plan:
    """The frozen ``Plan``: lists become tuples, dicts read-only mappings; ``modules`` are the
    finished runtime modules (none when the load was not simulated)."""
    values = {k: _frozen(v) for k, v in vars(state).items()}
    values["absent"] = MappingProxyType({k: tuple(v) for k, v in state.absent.items()})
    values["modules"] = MappingProxyType(modules or {})
    return Plan(**values)
