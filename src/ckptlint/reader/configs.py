"""Read ``config.json`` and ``hf_quant_config.json`` and report their syntax (CF30x).

Frameworks read these files with Python's ``json`` module, so Python's rules decide what is valid
(:mod:`ckptlint.reader.jsonfiles`). What the settings mean is checked later, by the simulation's
rules.

The rules (CF301-CF304) are declared in :mod:`ckptlint.rules.config_file`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ckptlint.reader.jsonfiles import jtype
from ckptlint.reader.names import CONFIG_NAME, QUANT_CONFIG_NAME
from ckptlint.reader.report import HYGIENE, LOAD, file_finding, listed
from ckptlint.rules.config_file import ConfigDuplicateKey, ConfigInvalidJson, ConfigMissing, ConfigNotAnObject

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.reader.source import Source


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
