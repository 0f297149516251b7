"""`mha-kit autograde ASSIGNMENT`: nbgrader's autograde for a whole course, several submissions
at once, recorded in gradebook.db exactly as `nbgrader autograde ASSIGNMENT` records them.

`nbgrader autograde` converts one submission after another, and SQLite takes one writer. So
the work is split where nbgrader's own converter splits it, between converting a notebook
and writing the gradebook:

1. In parallel, in grader processes (`grading.batch.in_parallel`), each submission goes
   through nbgrader's own `Autograde` converter with the course's configuration, loaded as
   `nbgrader autograde` loads it, but pointed at scratch space: a private copy of
   gradebook.db (the converter records the student and the submission before it converts;
   each copy comes from a snapshot taken before step 2 began writing) and a scratch
   autograded tree. Its preprocessors are the course's but those that write the gradebook
   (`RECORDING`), so the sanitizing step (outputs cleared, test cells restored from the
   gradebook and deleted ones added back, ...), `StudentCells` and `TrustedGrades` run as in
   `nbgrader autograde`.
2. Here, one submission after another as they come back, the same converter on the real
   gradebook, from the scratch tree (the graded notebooks and the submission's other files,
   timestamp.txt included) to the real autograded/ folder, with no sanitizing (the notebooks
   are sanitized already; it would clear their outputs) and only the `RECORDING`
   preprocessors: nbgrader's code records the student, the submission, its timestamp and late
   penalty, and every cell's grade and comment.

Merging private gradebooks instead would copy nbgrader's schema and rules here; step 2 is
cheap (no kernel, no grading), so nbgrader keeps writing its own database.

A submission whose grading process dies (its kernel can kill the process that runs it) is
graded again alone; if it kills that one too, step 2 records it from the submitted notebook
with 0 points and the reason in every test cell (`NotGraded`). A submission that nbgrader
cannot convert is left out of the gradebook, and said so (`nbgrader autograde` fails it too,
after recording the submission with no grades). So is one with none of the assignment's
notebooks, only others (a renamed one: nbgrader skips a notebook its gradebook does not list),
without a grader process: its line names the files and the name to give one. A notebook of
that kind beside the assignment's is left out too, and its line says so.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import logging
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps.autogradeapp import AutogradeApp
from nbgrader.converters import Autograde, NbGraderException
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades
from nbgrader.utils import determine_grade, is_grade
from sqlalchemy.exc import SAWarning
from traitlets import Bool
from traitlets.utils.importstring import import_item

from . import settings
from .course_settings import configured
from .grading.batch import in_parallel, safe_name, scratch_folder
from .grading.files import shown_language
from .grading.report import gradescope_results
from .messages import Message, MessageError, msg
from .runner.loading import cell_name, is_test_cell
from .trusted_autograde import KERNEL_TROUBLE, TrustedGrades, zero_points

RECORDING = (SaveAutoGrades, AssignLatePenalties)  # the preprocessors that write the gradebook


class CourseError(MessageError):
    """The course cannot be autograded: no gradebook, no such assignment, no submissions."""


@dataclass
class Graded:
    """One submission, as step 1 left it (and step 2, for `recorded`)."""

    student: str
    outcome: str = "graded"  # or "failed": nbgrader could not convert it; "died": see module
    score: float = 0.0  # what its autograded notebooks earn, a late penalty aside
    payloads: list[dict] = field(default_factory=list)  # the kit's results, one per notebook
    notes: list[Message] = field(default_factory=list)  # what went wrong, if anything
    recorded: bool = False


@dataclass(frozen=True)
class Scratch:
    """Where step 1 writes: private gradebooks and an autograded tree."""

    root: Path  # the course directory
    assignment: str
    folder: Path

    @property
    def graded(self) -> Path:
        return self.folder / "autograded"

    @property
    def gradebooks(self) -> Path:
        return self.folder / "gradebooks"

    @property
    def template(self) -> Path:
        """The course's gradebook as it was before step 2 began writing it."""
        return self.gradebooks / "course.db"


# --------------------------------------------------------------------------- nbgrader


class _ErrorLog(logging.Handler):
    """nbgrader's error messages, kept; its other messages dropped."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def summary(self) -> str:
        """The exception of the first traceback logged, else the first message."""
        for message in self.messages:
            lines = message.strip().splitlines()
            if lines and lines[0].startswith("Traceback"):
                return lines[-1]
        return self.messages[0] if self.messages else ""


@contextlib.contextmanager
def _quiet(log: logging.Logger) -> Iterator[_ErrorLog]:
    """nbgrader's log kept off the terminal (the progress bar is there); its errors kept."""
    errors, shown = _ErrorLog(), log.handlers[:]
    log.handlers = [errors]
    try:
        yield errors
    finally:
        log.handlers = shown


def course_app(root: Path) -> AutogradeApp:
    """`nbgrader autograde`'s app with the course's configuration, loaded as nbgrader loads it
    (Jupyter's config folders, then the course's nbgrader_config.py)."""
    app, here = AutogradeApp(), os.getcwd()
    os.chdir(root)  # nbgrader reads the current folder's nbgrader_config.py too
    try:
        app.initialize([], root=str(root))
    finally:
        os.chdir(here)
    return app


def converter(app: AutogradeApp, coursedir: CourseDirectory) -> Autograde:
    """nbgrader's Autograde converter, configured as the course says; `autograde_preprocessors`
    holds classes (or instances), never import strings."""
    result = Autograde(coursedir=coursedir, parent=app)
    result.force = True  # what to grade is decided before (`CourseAutograde._selected`)
    result.autograde_preprocessors = [import_item(p) if isinstance(p, str) else p
                                      for p in result.autograde_preprocessors]
    return result


def convert(autograde: Autograde) -> str | None:
    """Run the converter: None when it succeeded, else nbgrader's error."""
    with _quiet(autograde.log) as errors, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's use of SQLAlchemy's session
        try:
            autograde.start()
        except NbGraderException:
            return errors.summary()
    return None


class NotGraded(Preprocessor):
    """Every test cell of a submission that could not be graded: 0 points, and why."""

    enabled = Bool(True)

    def __init__(self, reason: Message, **kwargs: Any):
        super().__init__(**kwargs)
        self.reason = reason

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict[str, Any]
                   ) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
        lang = shown_language(nb.cells)
        for cell in nb.cells:
            if cell.cell_type == "code" and is_test_cell(cell):
                cell.outputs = zero_points(cell, self.reason, lang)
        return nb, resources


# --------------------------------------------------------------------------- step 1


def kernel_notes(nb: nbformat.NotebookNode) -> list[Message]:
    """What the kernel did wrong, from the errors in the student's cells: a timeout, a death."""
    return [msg(KERNEL_TROUBLE[output.ename], cell=cell_name(cell, nb.cells))
            for cell in nb.cells if not is_test_cell(cell)
            for output in cell.get("outputs", ())
            if output.output_type == "error" and output.ename in KERNEL_TROUBLE]


def _worker_notes(problems: list) -> list[Message]:
    """The kit's worker's own trouble (it timed out or crashed loading the notebook, ...)."""
    return [p for p in problems if isinstance(p, Message) and p.id.startswith("worker.")]


@functools.cache
def _grader_app(root: Path) -> AutogradeApp:
    """A grader process's app, loaded once for all the submissions it converts. The process
    writes nothing to the terminal from then on: its kernels' warnings would break the
    progress bar, and what matters comes back in `Graded.notes`."""
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)
    os.close(quiet)
    return course_app(root)


def grade_student(student: str, scratch: Scratch) -> Graded:
    """Step 1 for one student, in a grader process."""
    try:
        app = _grader_app(scratch.root)
        private = scratch.gradebooks / f"student-{safe_name(student)}.db"
        shutil.copyfile(scratch.template, private)
        coursedir = CourseDirectory(
            config=app.config, root=str(scratch.root), db_url=f"sqlite:///{private}",
            autograded_directory=str(scratch.graded), assignment_id=scratch.assignment,
            student_id=student)
        autograde = converter(app, coursedir)
        trusted: list[TrustedGrades] = []

        def kept(preprocessor: Any) -> Any:  # TrustedGrades made here, to read its results
            if isinstance(preprocessor, type) and issubclass(preprocessor, TrustedGrades):
                trusted.append(preprocessor(parent=app))
                return trusted[-1]
            return preprocessor

        autograde.autograde_preprocessors = [kept(p) for p in autograde.autograde_preprocessors
                                             if p not in RECORDING]
        error = convert(autograde)
        if error is not None:
            return Graded(student, "failed", notes=[msg("autograde.not_converted", error=error)])
        graded = Graded(student)
        folder = coursedir.format_path(coursedir.autograded_directory, student, scratch.assignment)
        for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.ipynb"))):
            nb = nbformat.read(path, as_version=4)
            graded.score += sum(determine_grade(c)[0] or 0 for c in nb.cells if is_grade(c))
            graded.notes += kernel_notes(nb)
        for grader in trusted:
            for results, problems in grader.graded:
                graded.payloads.append(gradescope_results(results, problems))
                graded.notes += _worker_notes(problems)
        return graded
    except Exception as err:  # the grader's own failure: this submission says so, others go on
        return Graded(student, "failed", notes=[msg("batch.grader_failed",
                                                    type=type(err).__name__, error=str(err))])


def _died(student: str) -> Graded:
    return Graded(student, "died", notes=[msg("batch.grader_died")])


def sqlite_file(db_url: str) -> Path:
    """The file of a `sqlite:///...` gradebook."""
    if not db_url.startswith("sqlite:///"):
        raise CourseError(msg("autograde.not_sqlite", url=db_url))
    return Path(db_url.removeprefix("sqlite:///"))


# --------------------------------------------------------------------------- the course


class CourseAutograde:
    """One `mha-kit autograde` run: `students`, then `grade` (step 1), then `record` (step 2).

    Use it as a context manager: the course's settings are in force and the scratch folder
    lives as long as it."""

    def __init__(self, root: Path, assignment: str, *, force: bool = False):
        self.root, self.assignment = root.resolve(), assignment
        self.app = course_app(self.root)
        self.coursedir = self.app.coursedir
        self.coursedir.assignment_id = assignment
        self.gradebook = gradebook = sqlite_file(self.coursedir.db_url)
        if not gradebook.is_file():
            raise CourseError(msg("autograde.no_gradebook", path=str(gradebook),
                                  assignment=assignment))
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                found = gb.find_assignment(assignment)
            except MissingEntry:
                raise CourseError(msg("autograde.no_assignment", assignment=assignment,
                                      path=str(gradebook))) from None
            self.max_score: float = found.max_score
            # What nbgrader grades: the notebooks generate_assignment released (and recorded).
            self.notebooks = sorted(f"{notebook.name}.ipynb" for notebook in found.notebooks)
        submitted = self._submitted()
        self.students, self.skipped = self._selected(list(submitted), force)
        # The notebooks of each student to grade that nbgrader skips, as none of the above.
        self.unknown = {student: names for student in self.students
                        if (names := [n for n in submitted[student] if n not in self.notebooks])}
        self.misnamed = [student for student in self.students
                         if len(self.unknown.get(student, ())) == len(submitted[student])]
        self._stack = contextlib.ExitStack()

    def _folder(self, student: str) -> str:
        """submitted/<student>/<assignment>/, from the course root."""
        cd = self.coursedir
        folder = cd.format_path(cd.submitted_directory, student, self.assignment)
        return os.path.join(os.path.relpath(folder, self.root), "")

    def _submitted(self) -> dict[str, list[str]]:
        """Every student with a notebook in submitted/<student>/<assignment>/: their names."""
        cd = self.coursedir
        pattern = cd.format_path(cd.submitted_directory, "(?P<student>[^/]+)",
                                 re.escape(self.assignment), escape=True)
        found = {match["student"]: names for folder in glob.glob(
            cd.format_path(cd.submitted_directory, "*", self.assignment))
            if (match := re.fullmatch(pattern, folder))
            and (names := sorted(os.path.basename(path) for path in glob.glob(
                os.path.join(glob.escape(folder), "*.ipynb"))))}
        return dict(sorted(found.items()))

    def _selected(self, submitted: list[str], force: bool) -> tuple[list[str], list[str]]:
        """(to grade, left as they are), by the rule of `nbgrader autograde [--force]`
        (`Autograde.init_destination`): a submission autograded already is graded again only
        when forced or resubmitted. Unlike init_destination, this deletes nothing: a student's
        autograded/ folder goes only when `record` writes the new one, so a submission that
        cannot be graded (or a run stopped half way) leaves it as the gradebook has it."""
        cd = self.coursedir
        excluded = set(cd.student_id_exclude.split(",")) - {""}
        chosen, skipped = [], []
        for student in submitted:
            graded = cd.format_path(cd.autograded_directory, student, self.assignment)
            handed_in = cd.get_existing_timestamp(
                cd.format_path(cd.submitted_directory, student, self.assignment))
            graded_at = cd.get_existing_timestamp(graded)
            again = student not in excluded and (
                force or not os.path.exists(graded)
                or None not in (handed_in, graded_at) and handed_in > graded_at)
            (chosen if again else skipped).append(student)
        return chosen, skipped

    def _left_out(self, student: str) -> Message:
        """Why some (`autograde.unknown_notebook`) or all (`autograde.misnamed`) of a
        student's notebooks are not graded."""
        return msg("autograde.misnamed" if student in self.misnamed
                   else "autograde.unknown_notebook", folder=self._folder(student),
                   found=self.unknown[student], expected=self.notebooks,
                   assignment=self.assignment)

    def __enter__(self) -> CourseAutograde:
        """The course's settings (`c.MhaKit` in its nbgrader_config.py) in force from here on,
        before a grader process, a zygote or a worker starts; and the scratch folder."""
        self._stack.enter_context(settings.chosen(**configured(self.app.config)))
        folder = Path(self._stack.enter_context(scratch_folder("mha-kit-autograde-")))
        self.scratch = Scratch(self.root, self.assignment, folder)
        self.scratch.gradebooks.mkdir()
        shutil.copyfile(sqlite_file(self.coursedir.db_url), self.scratch.template)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def grade(self, jobs: int) -> Iterator[Graded]:
        """Step 1: every chosen submission, `jobs` at once, each as it is done; first those
        with none of the assignment's notebooks, which nbgrader cannot grade."""
        for student in self.misnamed:
            yield Graded(student, "failed", notes=[self._left_out(student)])
        task = functools.partial(grade_student, scratch=self.scratch)
        gradable = [student for student in self.students if student not in self.misnamed]
        for _, graded in in_parallel(gradable, jobs, task, _died, str(self.scratch.folder)):
            if graded.student in self.unknown:
                graded.notes.append(self._left_out(graded.student))
            yield graded

    def record(self, graded: Graded) -> None:
        """Step 2 for one submission: into gradebook.db and autograded/, by nbgrader."""
        if graded.outcome == "failed":
            return
        coursedir = CourseDirectory(config=self.app.config, root=str(self.root),
                                    assignment_id=self.assignment, student_id=graded.student)
        autograde = converter(self.app, coursedir)
        recording = [p for p in autograde.autograde_preprocessors if p in RECORDING]
        if graded.outcome == "graded":
            coursedir.submitted_directory = str(self.scratch.graded)
            autograde.sanitize_preprocessors = []
            autograde.autograde_preprocessors = recording
        else:
            autograde.autograde_preprocessors = [NotGraded(graded.notes[0]), *recording]
        error = convert(autograde)
        graded.recorded = error is None
        if error is not None:
            graded.notes.append(msg("autograde.not_recorded", error=error))
        elif graded.outcome == "died":
            graded.notes.append(msg("autograde.zero"))
