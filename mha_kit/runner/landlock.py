"""Confinement by the kernel itself, with no helper program and no privilege: Landlock and a
seccomp filter, which a process applies to itself, for good, and passes to its children.

`confine(readable, writable)` leaves this process (its one thread, and all it starts):
- reading and running files only under `readable` and `writable` (running, where asked, only
  the programs `executable` names), writing, creating,
  removing and (ABI 3) truncating only under `writable` (Landlock's filesystem rules);
  /dev/null and its kind, and the GPU's device files, stay usable. Landlock does not see a
  file's metadata: seccomp turns chmod, chown, utime and extended attributes into calls that
  do nothing, and refuses `truncate` by path;
- no TCP connection and no bound port (Landlock ABI 4), no signal to a process outside it and
  its children, no abstract unix socket (ABI 6);
- no socket at all (seccomp: `socket` fails with EACCES, and `io_uring_setup`, whose rings
  can open sockets too), so UDP, unix sockets and TCP Fast Open (a `sendto` that connects,
  which Landlock's TCP rule lets through: measured on Linux 6.18) are closed as well.
  `local_sockets=True` (a Jupyter kernel) lets it make unix stream sockets, to listen on for
  its client, and netlink ones (ZeroMQ lists the machine's interfaces), and connect nowhere.

It needs no user namespace, so it works where bubblewrap cannot: in an unprivileged Docker
container (whose default seccomp profile allows the Landlock calls since moby #43199), and as
an ordinary user. `problem()` says why it cannot work here (gVisor answers ENOSYS; a kernel
built without Landlock or booted without it in `lsm=`, EOPNOTSUPP).

`python -I path/to/landlock.py CONFIG -- ARGV...` confines itself as the JSON CONFIG says
(`readable`, `writable`, `local_sockets`, `drop_capabilities`) and then runs ARGV in its place
(a kernel), with `import_path` first on its PYTHONPATH.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import glob
import json
import os
import platform
import stat
import sys
from collections.abc import Iterable

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # the same on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1  # seccomp(2): every thread

# Landlock's filesystem rights, each with the ABI that brought it.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
                    5: (1 << 16) - 1}
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a file's rule holds
READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (1 << 15) - 1 & ~(MAKE_CHAR | MAKE_BLOCK)  # everything but making device files
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")  # files and folders
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", *GPU_DEVICES)

# seccomp, per machine: its AUDIT_ARCH_*, and the numbers of the calls the filter looks at.
_METADATA_X86 = (90, 91, 92, 93, 94, 132, 235, 261, 260, 268, 280, 188, 189, 190, 197, 198, 199)
_METADATA_ARM = (52, 53, 54, 55, 88, 5, 6, 7, 14, 15, 16)
SECCOMP_ARCH = {
    "x86_64": {"arch": 0xC000003E, "socket": 41, "connect": 42, "truncate": 76,
               "io_uring_setup": 425, "metadata": (*_METADATA_X86, 452, 463, 466),
               "clone": 56, "clone3": 435, "fork": (57,), "sessions": (112, 109),
               "sysv": (29, 64, 68), "prctl": 157, "seccomp": 317},
    "aarch64": {"arch": 0xC00000B7, "socket": 198, "connect": 203, "truncate": 45,
                "io_uring_setup": 425, "metadata": (*_METADATA_ARM, 452, 463, 466),
                "clone": 220, "clone3": 435, "fork": (), "sessions": (157, 154),
                "sysv": (194, 190, 186), "prctl": 167, "seccomp": 277},
}  # metadata: chmod, chown, utime and xattr calls (fchmodat2, setxattrat, removexattrat last);
# fork: the call of its own (vfork, which runs a program at once, stays); sessions: setsid,
# setpgid; sysv: shmget, semget, msgget
CLONE_VM, CLONE_VFORK, CLONE_PARENT, CLONE_THREAD = 0x100, 0x4000, 0x8000, 0x10000
X32_BIT = 0x40000000  # x86_64's x32 calls: refused whole
AF_UNIX, AF_NETLINK, SOCK_STREAM, SOCK_TYPE_MASK = 1, 16, 1, 0xF
BPF_LD_W_ABS, BPF_JEQ, BPF_JGE, BPF_AND, BPF_RET = 0x20, 0x15, 0x35, 0x54, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
NOTHING_DONE = SECCOMP_RET_ERRNO | 0  # returns 0 and does nothing
REFUSED = SECCOMP_RET_ERRNO | errno.EACCES
NOT_PERMITTED = SECCOMP_RET_ERRNO | errno.EPERM
NO_SUCH_CALL = SECCOMP_RET_ERRNO | errno.ENOSYS  # clone3: C libraries fall back to clone
PR_CAPBSET_DROP, CAP_LAST, PR_SET_DUMPABLE = 24, 63, 4
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


class ConfinementError(OSError):
    """The kernel refused a step of the confinement: the process must not go on unconfined."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args: object) -> int:
    result = _libc().syscall(ctypes.c_long(number), *args)
    if result < 0:
        code = ctypes.get_errno()
        raise ConfinementError(code, f"syscall {number}: {os.strerror(code)}")
    return result


@functools.cache
def _version() -> int | str:
    """The kernel's Landlock ABI version, or the error name that says why it has none."""
    if sys.platform != "linux":
        return sys.platform
    try:
        return _syscall(CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))
    except ConfinementError as err:
        return errno.errorcode.get(err.errno, str(err.errno))


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none."""
    version = _version()
    return version if isinstance(version, int) else 0


def problem() -> tuple[str, dict[str, str | int]] | None:
    """Why `confine` cannot work here, as a reason's id and its data: `not_linux` (platform),
    `no_landlock` (error: ENOSYS, EOPNOTSUPP), `no_network` (abi, machine: no seccomp program
    for this machine, without which sockets stay open). None where it can."""
    version = _version()
    if sys.platform != "linux":
        return "not_linux", {"platform": sys.platform}
    if isinstance(version, str):
        return "no_landlock", {"error": version}
    if platform.machine() not in SECCOMP_ARCH:  # UDP, and TCP Fast Open past Landlock's rule
        return "no_network", {"abi": version, "machine": platform.machine()}
    return None


def describe() -> str:
    """The layer, as `mha-kit check --verbose` names it."""
    seccomp = "seccomp" if platform.machine() in SECCOMP_ARCH else "no seccomp"
    return f"Landlock ABI {abi()} + {seccomp}"


def _seccomp_program(local_sockets: bool) -> list[_SockFilter] | None:
    """The seccomp program (None on a machine it does not know). Refused with EACCES: `socket`
    (a kernel's: but unix stream and netlink ones), a kernel's `connect`, `io_uring_setup`,
    `truncate` by path (Landlock handles it from ABI 3), prctl's PR_SET_DUMPABLE (which would
    hide from the grader's disk watch what the process holds: `disk`), calls of another
    architecture. Done
    as nothing, returning 0: chmod, chown, utime and extended attributes, which Landlock does
    not see (another submission's mode set to 000; torch's compiler chmods its own files)."""
    calls = SECCOMP_ARCH.get(platform.machine())
    if calls is None:
        return None
    code: list[tuple] = [("ld", 4), ("jeq", calls["arch"], None, "refuse"), ("ld", 0),
                         ("jge", X32_BIT, "refuse", None)]
    code += [("jeq", nr, "nothing", None) for nr in calls["metadata"]]
    code += [("jeq", calls[name], "refuse", None) for name in ("io_uring_setup", "truncate")]
    code += [("jeq", calls["prctl"], "prctl", None)]
    if local_sockets:
        code += [("jeq", calls["connect"], "refuse", None),
                 ("jeq", calls["socket"], None, "allow"), ("ld", 16),  # the family, low half
                 ("jeq", AF_NETLINK, "allow", None), ("jeq", AF_UNIX, None, "refuse"),
                 ("ld", 24), ("and", SOCK_TYPE_MASK), ("jeq", SOCK_STREAM, "allow", "refuse")]
    else:
        code += [("jeq", calls["socket"], "refuse", "allow")]
    code += [("label", "prctl"), ("ld", 16), ("jeq", PR_SET_DUMPABLE, "refuse", "allow"),
             ("label", "allow"), ("ret", SECCOMP_RET_ALLOW), ("label", "nothing"),
             ("ret", NOTHING_DONE), ("label", "refuse"), ("ret", REFUSED)]
    return _assemble(code)


def _tasks_program(threads: bool) -> list[_SockFilter] | None:
    """The seccomp program of `refuse_new_tasks` (None on a machine it does not know)."""
    calls = SECCOMP_ARCH.get(platform.machine())
    if calls is None:
        return None
    code: list[tuple] = [("ld", 4), ("jeq", calls["arch"], None, "refuse"), ("ld", 0),
                         ("jge", X32_BIT, "refuse", None), ("jeq", calls["clone3"], "enosys", None)]
    code += [("jeq", nr, "refuse", None)
             for nr in (*calls["fork"], *calls["sessions"], *calls["sysv"])]
    code += [("jeq", calls["prctl"], None, "clone"), ("ld", 16),  # its option
             ("jeq", PR_SET_CHILD_SUBREAPER, "refuse", "allow"), ("label", "clone"),
             ("jeq", calls["clone"], None, "allow"), ("ld", 16)]  # clone's flags, low half
    code += [("and", CLONE_PARENT), ("jeq", CLONE_PARENT, "refuse", None), ("ld", 16)]
    if threads:
        code += [("and", CLONE_THREAD), ("jeq", CLONE_THREAD, "refuse", None), ("ld", 16)]
    code += [("and", CLONE_VM), ("jeq", 0, "refuse", None), ("ld", 16),  # a fork: its own memory
             ("and", CLONE_VM | CLONE_THREAD | CLONE_VFORK),  # memory shared: a thread, or
             ("jeq", CLONE_VM, "refuse", "allow"),  # vfork's child, its parent held till exec
             ("label", "allow"), ("ret", SECCOMP_RET_ALLOW), ("label", "enosys"),
             ("ret", NO_SUCH_CALL), ("label", "refuse"), ("ret", NOT_PERMITTED)]
    return _assemble(code)


def refuse_new_tasks(threads: bool) -> bool:
    """From now on this process (and the programs it runs) can start no process that runs its
    own copy of it (fork: EPERM), none that shares its memory and runs beside it (clone with
    CLONE_VM but neither CLONE_VFORK nor CLONE_THREAD), none that is another's child
    (CLONE_PARENT), no session or process group (setsid, setpgid), no System V IPC object
    (shmget, semget, msgget); with `threads`, no thread either. Programs still start (vfork,
    then exec: a compiler), in this process's group, which dies with it. It is made a child
    subreaper, for good (prctl refused after): a program whose parent ends stays its
    descendant, and its CPU time the worker's (red team 53 hid a loop over heads in a process
    given to init, and in one made the grader's child). Every thread of the process is bound,
    those already running too (TSYNC: torch's thread pool, CUDA's driver; review 53b ran
    student code on a pool thread, which made a process the grader's child). False where no
    seccomp program is known for this machine."""
    program = _tasks_program(threads)
    if program is None:
        return False
    if _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    instructions = (_SockFilter * len(program))(*program)
    fprog = _SockFprog(len(program), instructions)
    unsynced = _syscall(SECCOMP_ARCH[platform.machine()]["seccomp"],
                        ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                        ctypes.c_uint(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
    if unsynced != 0:  # the thread that could not be bound
        raise ConfinementError(errno.ESRCH, f"seccomp: thread {unsynced} was not bound")
    return True


def _assemble(code: list[tuple]) -> list[_SockFilter]:
    """BPF from ("ld", offset), ("and", k), ("jeq"/"jge", k, if_true, if_false) with labels
    (None: the next instruction), ("ret", k) and ("label", name)."""
    places, at = {}, 0
    for item in code:
        if item[0] == "label":
            places[item[1]] = at
        else:
            at += 1
    program: list[_SockFilter] = []
    for item in code:
        here = len(program)
        if item[0] == "ld":
            program.append(_SockFilter(BPF_LD_W_ABS, 0, 0, item[1]))
        elif item[0] == "and":
            program.append(_SockFilter(BPF_AND, 0, 0, item[1]))
        elif item[0] == "ret":
            program.append(_SockFilter(BPF_RET, 0, 0, item[1]))
        elif item[0] in ("jeq", "jge"):
            _, k, if_true, if_false = item
            skip = [0 if label is None else places[label] - here - 1
                    for label in (if_true, if_false)]
            program.append(_SockFilter(BPF_JEQ if item[0] == "jeq" else BPF_JGE, *skip, k))
    return program


def drop_capabilities() -> None:
    """Drop every capability this process holds, the bounding set first, where it holds any
    (a root process: under no_new_privs no program it runs gets them back)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return
    for cap in range(CAP_LAST + 1):  # EINVAL past the kernel's last one: nothing to drop
        _libc().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice, all zero
    if _libc().capset(header, data) != 0:
        raise ConfinementError(ctypes.get_errno(), "capset failed: cannot drop capabilities")


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _add_path(ruleset: int, path: str, rights: int) -> None:
    """A rule for `path` and all beneath it; a path that does not exist here is left out."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                 ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def reading_layer(readable: Iterable[str]) -> int:
    """A ruleset, for `confine`'s `layer`, that lets a process read files only under
    `readable` and handles no other right. Each process that inherits it may use it."""
    attr = _RulesetAttr(READ_FILE, 0, 0)
    ruleset = _syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                       ctypes.c_uint32(0))
    try:
        for path in readable:
            _add_path(ruleset, path, READ_FILE)
    except ConfinementError:
        os.close(ruleset)
        raise
    return ruleset


def confine(readable: Iterable[str], writable: Iterable[str], *,
            local_sockets: bool = False, executable: Iterable[str] | None = None,
            layer: int | None = None) -> None:
    """Confine this process for good (see the module). It must have one thread: Landlock and
    seccomp bind the calling thread and those it starts, never one already running.
    With `executable`, only the programs there (files, or folders and all beneath) may be
    run, not everything `readable` holds: a worker runs a compiler, never another Python.
    `layer` (`reading_layer`'s) is enforced as well: a file is read only where both allow it.
    ConfinementError: a step failed, and the caller must stop rather than run student code."""
    if (why := problem()) is not None:
        raise ConfinementError(errno.ENOSYS, f"Landlock cannot confine here: {why}")
    if _threads() != 1:
        raise ConfinementError(errno.EBUSY, f"{_threads()} threads: confine before any starts")
    version = abi()
    handled = FS_RIGHTS_BY_ABI.get(version, FS_RIGHTS_BY_ABI[5])
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)
    ruleset = _syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                       ctypes.c_uint32(0))
    try:
        reading = READ if executable is None else READ & ~EXECUTE
        for path in readable:
            _add_path(ruleset, path, reading & handled)
        for path in writable:
            _add_path(ruleset, path, (WRITE if executable is None else WRITE & ~EXECUTE)
                      & handled)
        for path in executable or ():
            _add_path(ruleset, path, READ & handled)
        for path in sorted({p for pattern in DEVICES for p in glob.glob(pattern)}):
            _add_path(ruleset, path, (READ_FILE | WRITE_FILE | IOCTL_DEV) & handled)
        if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        program = _seccomp_program(local_sockets)
        if program is not None:
            instructions = (_SockFilter * len(program))(*program)
            fprog = _SockFprog(len(program), instructions)
            if _libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
                raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
        for each in (ruleset,) if layer is None else (layer, ruleset):
            _syscall(RESTRICT_SELF, ctypes.c_int(each), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _main(argv: list[str]) -> None:
    """`python -I .../landlock.py CONFIG -- ARGV...` (see the module): run as a file, in
    isolated mode, so that nothing from the working folder (the student's) is imported before
    the confinement; standard library only."""
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -I landlock.py CONFIG -- ARGV...")
    config = json.loads(argv[0])
    try:
        confine(config["readable"], config["writable"], local_sockets=config["local_sockets"])
        if config["drop_capabilities"]:
            drop_capabilities()
    except OSError as err:
        sys.exit(f"cannot confine: {err}")
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [config["import_path"], path]))
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    _main(sys.argv[1:])
