"""A small lenient validator for the quantization configs quantizers write.

It checks the fields ckptlint reads (type, presence) and keeps everything else, like a pydantic
model with ``extra="allow"``, without importing pydantic on the ``check`` path. A mismatch raises
``Invalid`` with the location and a pydantic-style message; parse_quant_config turns it into a
CF311 finding.
"""

from __future__ import annotations

from typing import Any, ClassVar

REQUIRED = object()


class Invalid(ValueError):
    def __init__(self, loc: tuple, msg: str):
        super().__init__(msg)
        self.loc, self.msg = loc, msg

    def errors(self) -> list[dict[str, Any]]:
        return [{"loc": self.loc, "msg": self.msg}]


_NAMES = {str: "a valid string", int: "a valid integer", bool: "a valid boolean", float: "a valid number",
          list: "a valid list", dict: "a valid dictionary"}


def _check(kind: Any, value: Any, loc: tuple) -> Any:
    """kind: a type, a tuple of alternatives, ("list", item), ("dict", value) or a Lenient class."""
    if isinstance(kind, tuple) and kind and kind[0] in ("list", "dict"):
        if kind[0] == "list":
            if not isinstance(value, list):
                raise Invalid(loc, "Input should be a valid list")
            return [_check(kind[1], v, loc + (i,)) for i, v in enumerate(value)]
        if not isinstance(value, dict):
            raise Invalid(loc, "Input should be a valid dictionary")
        return {k: _check(kind[1], v, loc + (k,)) for k, v in value.items()}
    if isinstance(kind, tuple):  # alternatives, e.g. (bool, str, None)
        for alt in kind:
            if alt is None and value is None:
                return None
            if alt is not None:
                try:
                    return _check(alt, value, loc)
                except Invalid:
                    continue
        raise Invalid(loc, "Input should be " + " or ".join(_NAMES.get(a, "null") for a in kind))
    if isinstance(kind, type) and issubclass(kind, Lenient):
        return kind.model_validate(value, loc)
    if kind is Any:
        return value
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise Invalid(loc, "Input should be a valid integer")
    if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise Invalid(loc, "Input should be a valid number")
    if kind in (str, bool, list, dict) and not isinstance(value, kind):
        raise Invalid(loc, f"Input should be {_NAMES[kind]}")
    return value


class Lenient:
    """Declare ``FIELDS = {name: (kind, default)}``; unknown keys are kept in ``extra``."""

    FIELDS: ClassVar[dict[str, tuple[Any, Any]]] = {}

    @classmethod
    def model_validate(cls, data: Any, loc: tuple = ()) -> "Lenient":
        if not isinstance(data, dict):
            raise Invalid(loc, "Input should be a valid dictionary")
        obj = cls.__new__(cls)
        for name, (kind, default) in cls.FIELDS.items():
            if name in data and data[name] is not None:
                value = _check(kind, data[name], loc + (name,))
            elif default is REQUIRED:
                raise Invalid(loc + (name,), "Field required" if name not in data else "Input should not be null")
            else:  # absent or null: the default (quantizers write null for unset options)
                value = default() if callable(default) else default
            setattr(obj, name, value)
        obj.extra = {k: v for k, v in data.items() if k not in cls.FIELDS}
        return obj
