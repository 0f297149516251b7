"""nbgrader configuration: this repository is the nbgrader course directory.

Run nbgrader commands from the repository root (docs/instructor-guide.md). Every option
below exists in nbgrader 0.9 (see nbgrader/coursedir.py and nbgrader/preprocessors/).
"""

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    Execute,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from autograder.trusted_autograde import TrustedGrades

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

# solutions/<assignment>/ is the instructor's master, assignments/<assignment>/ the release.
# The course root is the directory nbgrader runs in (its default).
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"

# Seconds per cell when autograding. The slowest test cell is the speed check (about 2 s on a
# 2-core CPU); the margin covers a slow student machine and a first CUDA initialisation.
c.Execute.timeout = 120

# nbgrader gives 0 to a test cell with any stderr output. Warnings (a UserWarning from torch,
# a DeprecationWarning from a library) are not failures: drop stderr text that mentions one.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"Warning"

# A test cell the student deleted comes back at grading (an edited one is always restored).
c.OverwriteCells.add_missing_cells = True

# The points come from the kit's own grading of each submitted notebook, in its isolated worker,
# not from what the student's kernel printed: TrustedGrades rewrites every kit test cell's
# outputs right before SaveAutoGrades records them (autograder/trusted_autograde.py). The other
# preprocessors are nbgrader's defaults, in their order.
c.Autograde.autograde_preprocessors = [
    Execute,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    TrustedGrades,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
