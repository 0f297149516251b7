"""nbgrader configuration: this repository is the nbgrader course directory.

Run nbgrader commands from the repository root (docs/instructor-guide.md). Every option
below exists in nbgrader 0.9 (see nbgrader/coursedir.py and nbgrader/preprocessors/).
"""

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.converters import Autograde
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    DeduplicateIds,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from mha_kit.grading.registry import assignment_names
from mha_kit.sandboxed_kernel import SandboxedStudentCells
from mha_kit.trusted_autograde import KeepOneCopy, TrustedGrades

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

# solutions/<assignment>/ is the instructor's master, assignments/<assignment>/ the release.
# The course root is the directory nbgrader runs in (its default).
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"

# Seconds per cell when autograding (SandboxedStudentCells is nbgrader's Execute: its options
# apply). The kernel runs the student's cells only; the margin covers a slow student cell and a
# first CUDA initialisation.
c.Execute.timeout = 120

# nbgrader gives 0 to a test cell with any stderr output. Warnings (a UserWarning from torch,
# a DeprecationWarning from a library) are not failures: drop stderr text that mentions one.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"Warning"

# A test cell the student deleted comes back at grading (an edited one is always restored).
c.OverwriteCells.add_missing_cells = True

# AGENTS.md (what a student's coding assistant may do) is for the student's release: autograde
# would copy the master's into every student's autograded/ and feedback/ folders.
c.Autograde.exclude_overwriting = {name: ["AGENTS.md"] for name in assignment_names()}

# nbgrader's sanitizing steps, with `KeepOneCopy` in place of its DeduplicateIds: a test cell a
# student copied is left out instead of failing the whole submission.
c.Autograde.sanitize_preprocessors = [
    KeepOneCopy if step is DeduplicateIds else step
    for step in Autograde.class_traits()["sanitize_preprocessors"].default()
]

# The points come from the kit's own grading of each submitted notebook, in its isolated
# worker, not from what the student's kernel printed. SandboxedStudentCells (nbgrader's Execute)
# runs every cell but the kit's test cells, in a kernel inside the sandbox: files read-only but
# a scratch copy of its folder, no network (mha_kit/sandboxed_kernel.py). TrustedGrades then
# writes the test cells' outputs right before SaveAutoGrades records them
# (mha_kit/trusted_autograde.py). The other preprocessors are nbgrader's defaults, in their
# order. `mha-kit autograde ASSIGNMENT --jobs N` runs the same list, several submissions at
# once (mha_kit/course_autograde.py).
c.Autograde.autograde_preprocessors = [
    SandboxedStudentCells,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    TrustedGrades,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
