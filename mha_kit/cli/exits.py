"""Exit statuses of every `mha-kit` command."""

EXIT_PASS = 0  # done; for `check`, every check passed
EXIT_FAIL = 1  # some check failed, or a release could not be built
EXIT_USAGE = 2  # a usage error, an unreadable file, or a grader that cannot start
