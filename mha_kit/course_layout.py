"""What a course folder takes from the kit, and where a built wheel keeps it. The standard
library only: setup.py reads this file before the kit (or torch) can be imported."""

CONFIG = "nbgrader_config.py"
KIT_FILES = (CONFIG, "solutions", "translations")
PACKAGED = "course_files"  # mha_kit/course_files/ in a wheel
