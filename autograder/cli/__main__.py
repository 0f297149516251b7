"""`python -m autograder.cli`: the same as `mha-kit`."""

import sys

from . import main

sys.exit(main())
