"""The kit's settings in a course's nbgrader_config.py, as nbgrader users set options:

    c.MhaKit.call_timeout = 30
    c.MhaKit.forbidden = ["nn.MultiheadAttention", "torch.einsum"]

`MhaKit` has one typed, documented trait per setting of `mha_kit.settings` (its help is the
setting's) but `assignments`, which the kit reads where it is imported: a variable. The kit's
preprocessors (`trusted_autograde`, `sandboxed_kernel`) grade under what the config sets
(`configured`), over the environment's values, for nbgrader's own commands and `mha-kit
autograde` alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traitlets import Bool, Enum, Float, List, TraitType, Unicode
from traitlets.config import Config, Configurable
from traitlets.config.loader import PyFileConfigLoader

from . import settings
from .course_layout import CONFIG


def _trait(name: str) -> TraitType:
    meta, default = settings.FIELDS[name].metadata, getattr(settings.Settings, name)
    help = f"{meta['help']} (${settings.variable(name)}; mha_kit/settings.py)"
    if isinstance(default, bool):
        trait: TraitType = Bool(default, help=help)
    elif isinstance(default, float):
        trait = Float(default, help=help)
    elif isinstance(default, tuple):
        trait = List(Unicode(), default_value=list(default), help=help)
    elif meta["choices"]:
        trait = Enum(meta["choices"], default, help=help)
    else:
        trait = Unicode(default, help=help)
    return trait.tag(config=True)


CONFIGURABLE = tuple(name for name, f in settings.FIELDS.items() if f.metadata["in_config"])
MhaKit = type("MhaKit", (Configurable,), {
    "__doc__": "mha-kit's settings (mha_kit/settings.py; docs/settings.md).",
    **{name: _trait(name) for name in CONFIGURABLE}})


def configured(config: Config) -> dict[str, Any]:
    """The settings `config` sets in its `MhaKit` section, checked by their traits."""
    section = config.get("MhaKit", {})
    kit = MhaKit(config=config)
    return {name: getattr(kit, name) for name in section if name in CONFIGURABLE}


def from_folder(course: Path) -> dict[str, Any]:
    """The settings the nbgrader_config.py of folder `course` sets (none without one), for a
    command that nbgrader does not run (`mha-kit gradescope`)."""
    if not (course / CONFIG).is_file():
        return {}
    return configured(PyFileConfigLoader(CONFIG, path=str(course)).load_config())
