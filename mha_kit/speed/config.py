"""Which timing config a speed check uses: its graded one, or a test config the `speed_config`
setting names (the kit's tests: the speed message then says so). Each assignment's speed check
defines its own sizes for each (docs/speed.md).
"""

from __future__ import annotations

from .. import settings

# "tiny" takes milliseconds, for tests of a check's logic: its timed calls may be too short for
# the CPU-time bound (`speed.verdict`), so a correct answer need not pass. "small" is the
# graded config with fewer timed calls: a correct answer passes, for a fraction of the time.
TEST_CONFIGS = ("tiny", "small")


def chosen_test_config() -> str | None:
    """The test config the `speed_config` setting names, if it names one."""
    name = settings.current().speed_config
    return name if name in TEST_CONFIGS else None
