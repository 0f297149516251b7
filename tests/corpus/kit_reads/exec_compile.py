"""Red team 45: no code of its own. It reads the installed kit's oracle at load time and runs
it under a name of its own, which the kit's answering watch would take for the student's.
Its honest twin (an empty file) earns nothing; so must it (`load.kit_read`)."""

import os

import mha_kit

_ns = {"__name__": "my_helpers"}
with open(os.path.join(os.path.dirname(mha_kit.__file__), "oracle.py"), "rb") as _file:
    exec(compile(_file.read(), "my_helpers.py", "exec"), _ns)
split_heads, attend = _ns["split_heads"], _ns["attend"]
