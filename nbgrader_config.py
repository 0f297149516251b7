"""nbgrader configuration: this repository is the nbgrader course directory.

Run nbgrader commands from the repository root (docs/instructor-guide.md). Every option
below exists in nbgrader 0.9 (see nbgrader/coursedir.py and nbgrader/preprocessors/).
"""

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
