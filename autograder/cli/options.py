"""What several commands share: the limits on student code, the device, the language, and
the warning where student code runs without the sandbox."""

from __future__ import annotations

import argparse
import sys

from ..messages import LANG_VARIABLE, LANGUAGES, msg, render
from ..runner import sandbox
from ..runner.policy import Limits
from ..runtime import default_device


def warn_if_unprotected() -> None:
    """Say on stderr what is not protected, where student code runs without the sandbox."""
    if (unprotected := sandbox.unprotected()) is not None:
        print(render(unprotected), file=sys.stderr, flush=True)


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """--timeout, --check-timeout, --total-timeout and --memory-gib, for `check` and `grade`."""
    defaults = Limits()
    parser.add_argument("--timeout", type=float, metavar="S",
                        help=f"seconds for one call into student code (default "
                             f"{defaults.call_s:g}; ${Limits.ENV['call_s']})")
    parser.add_argument("--check-timeout", type=float, metavar="S",
                        help=f"seconds for all the calls of one check (default "
                             f"{defaults.check_s:g}; ${Limits.ENV['check_s']})")
    parser.add_argument("--total-timeout", type=float, metavar="S",
                        help=f"seconds for a whole submission (default {defaults.total_s:g}; "
                             f"${Limits.ENV['total_s']})")
    parser.add_argument("--memory-gib", type=float, metavar="G",
                        help=f"memory for student code (default {defaults.memory_gib:g}; "
                             f"${Limits.ENV['memory_gib']})")


def limits_from(args: argparse.Namespace) -> Limits:
    """The limits the flags and MHA_KIT_* variables set (flags win)."""
    return Limits.from_env(call_s=args.timeout, check_s=args.check_timeout,
                           total_s=args.total_timeout, memory_gib=args.memory_gib)


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
                        help=f"language of the messages (default: ${LANG_VARIABLE}, else en)")
