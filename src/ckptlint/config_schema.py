"""Strict schema of ckptlint's own configuration (``[tool.ckptlint]`` / ``ckptlint.toml``).

Imported only when a configuration file is actually read, so a plain ``check`` never pays for
pydantic.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


def _kebab(name: str) -> str:
    return name.replace("_", "-")



# The largest tensor/expert-parallel size taken (a deployment has at most thousands of GPUs; a bound
# keeps every size computed from it an ordinary number).
MAX_PARALLEL = 1 << 16

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, alias_generator=_kebab, populate_by_name=False,
                              frozen=True)


class IgnoreEntry(_Strict):
    pattern: str = Field(min_length=1)
    codes: list[str] = Field(min_length=1)
    reason: str

    @field_validator("reason")
    @classmethod
    def _reason_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("reason must not be empty: say why these findings are accepted")
        return v


class Config(_Strict):
    target: Optional[list[str]] = None
    select: Optional[list[str]] = None
    ignore: list[str] = Field(default_factory=list)
    extend_select: list[str] = Field(default_factory=list)
    fail_on: Optional[Literal["error", "warning", "info"]] = None
    no_verdict: Optional[Literal["fail", "pass"]] = None
    speculative: Optional[bool] = None
    platform: Optional[Literal["cuda", "rocm"]] = None
    tp: Optional[int] = Field(default=None, ge=1, le=MAX_PARALLEL)
    per_tensor_ignores: list[IgnoreEntry] = Field(default_factory=list)
    per_module_ignores: list[IgnoreEntry] = Field(default_factory=list)

    @field_validator("target", mode="before")
    @classmethod
    def _one_target(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


KEYS = tuple(sorted(f.alias or _kebab(n) for n, f in Config.model_fields.items()))
IGNORE_KEYS = tuple(sorted(f.alias or _kebab(n) for n, f in IgnoreEntry.model_fields.items()))



def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _describe(exc: ValidationError) -> str:
    """One line for the first problem, naming the offending key."""
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])  # a typo explains the rest
    loc = tuple(err["loc"])
    where = _loc(loc[:-1])
    prefix = f"{where}: " if where else ""
    if err["type"] == "extra_forbidden":
        expected = IGNORE_KEYS if where else KEYS
        return f"{prefix}unknown field {str(loc[-1])!r} (expected one of: {', '.join(expected)})"
    if err["type"] == "missing":
        return f"{prefix}missing required field {str(loc[-1])!r}"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{_loc(loc)}: {msg}"


