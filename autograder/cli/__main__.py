"""`python -m autograder.cli`: the same as `mha-kit`."""

from . import console

console()
