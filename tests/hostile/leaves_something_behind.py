"""Hostile: tries to leave something on the machine after grading, and to hold more than its
memory limit: a process in a session of its own (setsid, then a double fork), a program started
in a new session, a System V shared-memory segment, and a file unlinked while held open. Each
attempt's failure is swallowed, as a determined student would; `split_heads` is right.

MARKER names everything it makes (its programs' argv[0]), for tests/test_batch.py to look for
after the batch.
"""

import contextlib
import ctypes
import os
import shutil
import subprocess
import tempfile

MARKER = "mhakit-hostile-leftover"
SHM_KEY = 0x6D6B6974  # "mkit"

with contextlib.suppress(Exception):  # disk held after the scratch folder is gone, by
    # the processes below, which inherit it
    ballast = open(os.path.join(tempfile.gettempdir(), MARKER), "w+b")
    os.unlink(ballast.name)
    ballast.write(b"\0" * (32 << 20))
with contextlib.suppress(Exception):  # a session of its own, out of the worker's group
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", [MARKER, "300"])  # keeps the ballast's descriptor
        os._exit(0)
with contextlib.suppress(Exception):  # a program in a new session
    subprocess.Popen([MARKER, "300"], executable=shutil.which("sleep"), start_new_session=True,
                     pass_fds=[ballast.fileno()])
with contextlib.suppress(Exception):  # the kernel's call, past Python's os.fork
    if ctypes.CDLL(None).fork() == 0:
        os.execvp("sleep", [MARKER, "300"])
with contextlib.suppress(Exception):  # 64 MiB of System V shared memory, never removed
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmget(SHM_KEY, 64 << 20, 0o1600)


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2)
