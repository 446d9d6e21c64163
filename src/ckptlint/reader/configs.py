"""Read ``config.json`` and ``hf_quant_config.json`` and report their syntax (CF30x).

Frameworks read these files with Python's ``json`` module, so Python's rules decide what is valid
(:mod:`ckptlint.reader.jsonfiles`). What the settings mean is checked later, by the simulation's
rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ckptlint.reader.jsonfiles import jtype
from ckptlint.reader.names import CONFIG_NAME, QUANT_CONFIG_NAME
from ckptlint.reader.report import HYGIENE, LOAD, file_finding, listed
from ckptlint.rules.base import ReaderRule

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.reader.source import Source


class ConfigMissing(ReaderRule):
    """`config.json` is missing next to the weights.

    ## What it does
    Reports a checkpoint directory that has weights or an index but no `config.json`.

    ## Why is this bad?
    Frameworks need `config.json` for the architecture and the quantization; without it
    nothing loads, and ckptlint can only check the files as containers.

    ## Example
    A directory with only `model-*.safetensors` and the index.

    ## How to fix
    Download `config.json` from the model repository.
    """

    code = "CF301"
    name = "config-missing"
    consequences = (LOAD,)


class ConfigInvalidJson(ReaderRule):
    """`config.json` or `hf_quant_config.json` cannot be parsed.

    ## What it does
    Reports a config file that cannot be read, is not UTF-8, or is not valid JSON (Python's
    rules, which frameworks use). A config file that is not a regular file (a FIFO, a device)
    or is larger than 64 MiB is not read at all and reported the same way.

    ## Why is this bad?
    Frameworks parse the file at startup and fail.

    ## Example
    A trailing comma after the last key of `config.json`.

    ## How to fix
    Fix the JSON, or download the file again.
    """

    code = "CF302"
    name = "config-invalid-json"
    consequences = (LOAD,)


class ConfigNotAnObject(ReaderRule):
    """`config.json` or `hf_quant_config.json` is valid JSON but not an object.

    ## What it does
    Reports a config file whose top-level JSON value is not an object.

    ## Why is this bad?
    Frameworks expect a mapping of settings and fail on anything else.

    ## Example
    `config.json` containing `[]` or `null`.

    ## How to fix
    Download the file again.
    """

    code = "CF303"
    name = "config-not-an-object"
    consequences = (LOAD,)


class ConfigDuplicateKey(ReaderRule):
    """A config file repeats a key.

    ## What it does
    Reports keys that appear more than once in the same object of `config.json` or
    `hf_quant_config.json`.

    ## Why is this bad?
    JSON parsers silently keep the last value, so an edit to the first copy (e.g. of
    `quantization_config`) has no effect.

    ## Example
    Two `"quantization_config"` blocks in one `config.json`.

    ## How to fix
    Remove the stale copy.
    """

    code = "CF304"
    name = "config-duplicate-key"
    consequences = (HYGIENE,)


def read_configs(ck: "Checkpoint", src: "Source", present: Callable[[str], bool], *, require_config: bool) -> None:
    """Read both config files from ``src`` into ``ck`` (``present``: whether ``src`` has a file)."""
    for name in (CONFIG_NAME, QUANT_CONFIG_NAME):
        if not present(name):
            if name == CONFIG_NAME and require_config:
                ck.issues.append(file_finding(
                    ConfigMissing, LOAD, CONFIG_NAME,
                    "missing: frameworks need it to know the architecture and quantization; the weights were "
                    "checked as a container only",
                    hint="download config.json from the model repository (it is small and always required)"))
            continue
        jr = src.read_json(name)
        if jr.text is not None:
            ck.texts[name] = jr.text
        reader = "frameworks" if name == CONFIG_NAME else "frameworks that read it"
        if jr.error is not None:
            effect = "not read, so nothing in it was checked" if jr.refused else f"{reader} fail to load it"
            ck.issues.append(file_finding(ConfigInvalidJson, LOAD, name, f"{jr.error}; {effect}",
                                          hint=f"fix or re-download {name}"))
            continue
        if type(jr.obj) is not dict:
            ck.issues.append(file_finding(ConfigNotAnObject, LOAD, name,
                                          f"is a JSON {jtype(jr.obj)}, not an object; {reader} fail to load it",
                                          hint=f"fix or re-download {name}"))
            continue
        if name == CONFIG_NAME:
            ck.config = jr.obj
        else:
            ck.hf_quant_config = jr.obj
        if jr.duplicates:
            ck.issues.append(file_finding(
                ConfigDuplicateKey, HYGIENE, name,
                f"key {jr.duplicates[0]!r}" + (f" and {len(jr.duplicates) - 1} more" if len(jr.duplicates) > 1 else "")
                + " appear(s) more than once; only the last value is used", data={"keys": listed(jr.duplicates), "count": len(jr.duplicates)},
                hint="remove the stale copy so the file says one thing"))
