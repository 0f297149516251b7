"""`python -m mha_kit.cli`: the same as `mha-kit`."""

from . import console

console()
