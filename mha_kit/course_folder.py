"""`mha-kit course init DIR`: an nbgrader course folder apart from the kit.

A course needs the kit's English masters (`solutions/<assignment>/`, each notebook and its
AGENTS.md), their editions' folders (`solutions/<assignment>_<lang>/`, rebuilt by `mha-kit
release` from the master and its overlay `translations/<lang>/<notebook>.json`), and an
nbgrader_config.py that names the kit's preprocessors. The kit's checkout holds them once; a
wheel carries a copy under `mha_kit/course_files/` (`course_layout`, which setup.py reads).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .course_layout import CONFIG, PACKAGED
from .messages import MessageError, msg

COURSE_HEADER = '''"""\
nbgrader configuration of this course folder, written by `mha-kit course init`.

Run `mha-kit release`, `mha-kit autograde` and nbgrader's commands from this folder: it is
nbgrader's course directory (its default root). The kit's settings (limits on student code,
the sandbox, forbidden APIs, the secret) go at the end of this file, as `c.MhaKit.<setting>`;
`python -m mha_kit.settings` lists them all. Every nbgrader option below exists in nbgrader 0.9.
"""'''


class CourseError(MessageError):
    """A course folder that cannot be written."""


def kit_files() -> Path:
    """The folder that holds `course_layout.KIT_FILES`: the wheel's copy, else (an editable
    install) the kit's checkout."""
    package = Path(__file__).resolve().parent
    packaged = package / PACKAGED
    return packaged if packaged.is_dir() else package.parent


def kit_assignments() -> list[str]:
    """The assignments whose masters the kit ships."""
    from .grading.registry import ASSIGNMENTS

    solutions = kit_files() / "solutions"
    return [name for name in ASSIGNMENTS if (solutions / name).is_dir()]


def planned(assignments: list[str]) -> dict[Path, Path]:
    """Each file the course gets (relative to it) -> the kit's file it copies; the config
    apart (`course_config`)."""
    from .editions import masters, overlay_path
    from .grading.registry import EDITION_LANGUAGES, edition_name

    source = kit_files()
    files: dict[Path, Path] = {}
    for assignment in assignments:
        for lang in EDITION_LANGUAGES:
            for master in masters(source, assignment):
                overlay = overlay_path(source, master, lang)
                if overlay.is_file():
                    files[overlay.relative_to(source)] = overlay
        for name in (assignment, *(edition_name(assignment, lang) for lang in EDITION_LANGUAGES)):
            folder = source / "solutions" / name
            for path in sorted(folder.rglob("*") if folder.is_dir() else []):
                if path.is_file() and ".ipynb_checkpoints" not in path.parts:
                    files[path.relative_to(source)] = path
    return files


def course_config() -> str:
    """The kit's nbgrader_config.py with a course's header, and the kit's settings as
    commented examples at their defaults."""
    from .course_settings import CONFIGURABLE
    from .settings import FIELDS, GRADESCOPE

    text = (kit_files() / CONFIG).read_text(encoding="utf-8")
    body = text.split('"""', 2)[2]  # after the checkout's docstring
    examples = []
    for name in CONFIGURABLE:
        if FIELDS[name].metadata["applies"] == GRADESCOPE:  # Gradescope reads no course config
            continue
        default = FIELDS[name].default
        value = list(default) if isinstance(default, tuple) else default
        examples.append(f"# c.MhaKit.{name} = {value!r}  # {FIELDS[name].metadata['applies']}")
    return (COURSE_HEADER + body.rstrip("\n") + "\n\n# The kit's settings, at their defaults: "
            "uncomment one to change it for every command here.\n"
            + "\n".join(examples) + "\n")


def init(course: Path, assignments: list[str], force: bool = False) -> list[Path]:
    """Write the course folder `course` for `assignments`; the files written. Refuses
    (CourseError) an unknown assignment, or, unless `force`, a file that exists already."""
    known = kit_assignments()
    unknown = [name for name in assignments if name not in known]
    if unknown:
        raise CourseError(msg("course.unknown", unknown=", ".join(unknown),
                              known=", ".join(known)))
    files = planned(assignments or known)
    taken = [course / path for path in (Path(CONFIG), *files) if (course / path).exists()]
    if taken and not force:
        raise CourseError(msg("course.exists", paths=", ".join(map(str, taken))))
    course.mkdir(parents=True, exist_ok=True)
    (course / CONFIG).write_text(course_config(), encoding="utf-8")
    for path, source in files.items():
        (course / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, course / path)
    return [course / CONFIG, *(course / path for path in files)]
