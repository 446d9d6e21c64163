"""Attribute access to plain JSON data, for ckptlint's own pre-validated data files.

The data files are validated against their pydantic schemas when they are compiled and in the test
suite; at run time ``check`` reads the compiled JSON and wraps it here, so it never pays for
importing pydantic or building its schemas.
"""

from __future__ import annotations

from typing import Any

_ALIASES = {"cls": "class", "schema_": "schema"}


class NS(dict):
    """A dict whose keys are also attributes (``ns.match`` is ``ns["match"]``).

    :func:`wrap` makes the dict its own instance ``__dict__``, so reading an attribute is a plain
    instance lookup done in C (the simulation reads target data hundreds of thousands of times);
    ``__getattr__`` remains for the aliases and for dicts with a key that would shadow a dict
    method (those keep an empty ``__dict__``).
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[_ALIASES.get(name, name)]
        except KeyError:
            raise AttributeError(name) from None

    def __hash__(self) -> int:  # used as a memo key (frozen by convention)
        return id(self)

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return plain(self)


_DICT_ATTRS = frozenset(dir(dict)) | {"model_dump"}


def wrap(value: Any) -> Any:
    if isinstance(value, dict):
        ns = NS((k, wrap(v)) for k, v in value.items())
        if _DICT_ATTRS.isdisjoint(ns):
            ns.__dict__ = ns
        return ns
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
