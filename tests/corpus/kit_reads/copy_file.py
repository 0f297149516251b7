"""Red team 45: no code of its own. It copies the installed kit's oracle into its folder at
load time and imports the copy, whose code has the copy's name. Its honest twin (an empty
file) earns nothing; so must it (`load.kit_read`)."""

import os
import pathlib
import shutil
import sys

import mha_kit

shutil.copyfile(pathlib.Path(mha_kit.__file__).parent / "oracle.py", "my_oracle.py")
sys.path.insert(0, os.getcwd())
from my_oracle import attend, split_heads  # noqa: E402, F401
