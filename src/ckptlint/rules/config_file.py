"""The syntax of ``config.json`` and ``hf_quant_config.json`` (CF301-CF304).

:mod:`ckptlint.reader.configs` detects these and builds their findings with these classes. What
the settings mean is checked by the simulation's rules (CF311, CF312).
"""

from __future__ import annotations

from ckptlint.findings import Consequence
from ckptlint.rules.base import ReaderRule


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
    consequences = (Consequence.LOAD_ERROR,)


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
    consequences = (Consequence.LOAD_ERROR,)


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
    consequences = (Consequence.LOAD_ERROR,)


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
    consequences = (Consequence.HYGIENE,)
