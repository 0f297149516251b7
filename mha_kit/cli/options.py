"""What several commands share: the limits on student code, the device, the language (flags
that override the kit's settings: `mha_kit.settings`), and the warning where student code
runs without the sandbox."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import settings
from ..messages import msg, render
from ..runner import sandbox
from ..runtime import default_device
from ..settings import LANGUAGES, Settings

# flag (its `dest`) -> the setting it overrides
SETTING_FLAGS = {"timeout": "call_timeout", "check_timeout": "check_timeout",
                 "total_timeout": "total_timeout", "memory_gib": "memory_gib", "lang": "lang"}


def warn_if_unprotected() -> None:
    """Say on stderr what is not protected, where student code runs without the sandbox."""
    if (unprotected := sandbox.unprotected()) is not None:
        print(render(unprotected), file=sys.stderr, flush=True)


def _help(setting: str) -> str:
    """A flag's help: its setting's, with its default and variable."""
    meta = settings.FIELDS[setting].metadata
    return (f"{meta['help']} (default {getattr(Settings, setting):g}; "
            f"${settings.variable(setting)})")


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """--timeout, --check-timeout, --total-timeout and --memory-gib, for `check` and `grade`."""
    for flag, metavar in (("--timeout", "S"), ("--check-timeout", "S"),
                          ("--total-timeout", "S"), ("--memory-gib", "G")):
        dest = flag[2:].replace("-", "_")
        parser.add_argument(flag, type=float, metavar=metavar, help=_help(SETTING_FLAGS[dest]))


def chosen_by_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command's flags override (those given)."""
    return {setting: getattr(args, dest) for dest, setting in SETTING_FLAGS.items()
            if getattr(args, dest, None) is not None}


def add_device_flag(parser: argparse.ArgumentParser, what: str = "run and time") -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help=f"where to {what} (default: cuda when available)")


def chosen_device(args: argparse.Namespace) -> str | None:
    """The device --device names (else cuda when available); None, said on stderr, where
    cuda is asked for and this torch has none (a CPU build, or no GPU visible)."""
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(render(msg("cli.no_cuda", torch=torch.__version__)), file=sys.stderr)
        return None
    return args.device or default_device()


def add_lang_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lang", choices=LANGUAGES,
                        help=f"language of the messages (default: ${settings.variable('lang')}, "
                             "else en)")
