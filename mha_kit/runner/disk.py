"""The disk a worker's files take together, counted by the grader while it runs: `DiskWatch`
(a notebook's kernel under nbgrader is watched the same way: `sandboxed_kernel`).

The kernel bounds each file a worker writes (RLIMIT_FSIZE, `serve.limit_resources`), but
nothing bounds all of them without a privilege the grader may lack: a quota, or a mount.
Landlock alone makes no mount. Under bubblewrap the mount namespace is the zygote's, shared by
every worker of a grader process, whose folders the grader fills and removes from outside; a
size-limited tmpfs there would also keep the files in memory that no memory limit counts.

So the grader counts what the worker's files take: every file and folder in the worker's
folder, and every file the worker (or a program it runs) holds that has no name any more
(deleted, or made with O_TMPFILE), through an open descriptor or a mapping. Past the limit it
kills the worker's process group. It counts again after POLL_S seconds at most, and sooner as
the files near the limit: code that writes at WRITE_RATE passes it by what it writes in
MIN_POLL_S (measured here: 3 to 45 MiB past a limit of 64 MiB). A count takes 1 to 2 ms, most
of it the kernel listing the worker's mappings.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

POLL_S, MIN_POLL_S = 0.25, 0.01
WRITE_RATE = 4e9  # bytes per second: a fast disk's, or memory's before it reaches the disk
MIN_BYTES = 4096  # what any file or folder counts at least: an empty file still takes an inode
Sizes = dict[tuple[int, int], int]  # bytes by (device, inode): a file of two names counts once


def _bytes(st: os.stat_result) -> int:
    return max(st.st_blocks * 512, MIN_BYTES)


def _in_folder(folder: Path, sizes: Sizes) -> None:
    """Every file and folder beneath `folder`. PermissionError: one the grader may not read
    (possible only without Landlock, whose seccomp program makes chmod do nothing)."""
    stack = [str(folder)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except (FileNotFoundError, NotADirectoryError):  # removed, or replaced, meanwhile
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            sizes[st.st_dev, st.st_ino] = _bytes(st)
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, as /proc lists each thread's children."""
    tree = [pid]
    for parent in tree:  # grows as it goes
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                with contextlib.suppress(OSError):
                    tree += map(int, Path(f"/proc/{parent}/task/{task}/children").read_text()
                                .split())
    return tree


def _held(pid: int, sizes: Sizes) -> None:
    """The files process `pid` holds that have no name any more: open, or mapped (measured
    through /proc/PID/map_files where the grader may read it, with CAP_SYS_ADMIN or
    CAP_CHECKPOINT_RESTORE; else by the length mapped). None where /proc hides them: not
    Linux, or, to a grader without CAP_SYS_PTRACE, a process of another account that did not
    open its entries to that account (`serve.open_to_grader`)."""
    proc = f"/proc/{pid}"
    try:
        fds = os.listdir(f"{proc}/fd")
        maps = Path(f"{proc}/maps").read_text()
    except OSError:
        return
    for fd in fds:
        link = f"{proc}/fd/{fd}"
        try:
            if os.readlink(link).endswith(" (deleted)"):
                st = os.stat(link)
                sizes[st.st_dev, st.st_ino] = _bytes(st)
        except OSError:  # closed meanwhile
            continue
    for line in maps.splitlines():
        if not line.endswith(" (deleted)"):
            continue
        span, _, _, device, inode, _ = line.split(maxsplit=5)
        major, minor = (int(part, 16) for part in device.split(":"))
        key = (os.makedev(major, minor), int(inode))
        if key not in sizes:
            try:
                sizes[key] = _bytes(os.stat(f"{proc}/map_files/{span}"))
            except OSError:
                start, end = (int(part, 16) for part in span.split("-"))
                sizes[key] = end - start


@contextlib.contextmanager
def _reading_as(account: tuple[int, int] | None) -> Iterator[None]:
    """Meanwhile, this thread's file-system ids are `account`'s (Linux; None: its own)."""
    if account is None or sys.platform != "linux":
        yield
        return
    libc = ctypes.CDLL(None)
    libc.setfsgid(account[1])
    libc.setfsuid(account[0])
    try:
        yield
    finally:
        libc.setfsuid(os.geteuid())
        libc.setfsgid(os.getegid())


def used(folder: Path, pid: int, account: tuple[int, int] | None = None,
         proc_as_account: bool = True) -> float:
    """Bytes that the files in `folder` and the nameless files process `pid` and its
    descendants hold take together; infinite where the grader may not read a folder there
    (what it cannot count is not allowed). With `account`, the folder is read with its
    file-system ids, and /proc too where `proc_as_account` (`DiskWatch`)."""
    sizes: Sizes = {}
    try:
        with _reading_as(account):
            _in_folder(folder, sizes)
    except PermissionError:
        return math.inf
    with _reading_as(account if proc_as_account else None):
        for process in process_tree(pid):
            _held(process, sizes)
    return sum(sizes.values())


class DiskWatch:
    """Counts what process `pid` (a worker, a kernel: the leader of its process group) and the
    files in its `folder` take, and kills its process group once that is more than `limit`
    bytes (`exceeded`). `account` (uid, gid): the process's, where it is not the grader's; the
    watch then reads the folder with that account's file-system ids (a folder it swaps for a
    link leads nowhere the account may not go), and /proc too where `proc_as_account`, as a
    grader without CAP_SYS_PTRACE (a container's root) must: only a process that opened its
    /proc entries to its account (`serve.open_to_grader`) can be read so; an undumpable one's
    are read with the grader's own ids, which a root's CAP_SYS_PTRACE lets read."""

    def __init__(self, folder: Path, pid: int, limit: int, account: tuple[int, int] | None,
                 proc_as_account: bool = True):
        self.exceeded = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(folder, pid, limit, account, proc_as_account),
            name="mha-kit disk watch", daemon=True)
        self._thread.start()

    def _watch(self, folder: Path, pid: int, limit: int, account: tuple[int, int] | None,
               proc_as_account: bool) -> None:
        wait = MIN_POLL_S
        while not self._stopping.wait(wait):
            left = limit - used(folder, pid, account, proc_as_account)
            if left < 0:
                self.exceeded = True
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.killpg(pid, signal.SIGKILL)
                return
            wait = min(POLL_S, max(MIN_POLL_S, left / WRITE_RATE))

    def stop(self) -> None:
        """Watch no more: best before the process is reaped, after which its pid may be
        another's."""
        self._stopping.set()
        self._thread.join()
