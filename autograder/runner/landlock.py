"""Confinement by the kernel itself, with no helper program and no privilege: Landlock and a
seccomp filter, which a process applies to itself, for good, and passes to its children.

`confine(readable, writable)` leaves this process (its calling thread, and all it starts):
- reading and running files only under `readable` and `writable`, writing, creating and
  removing only under `writable` (Landlock's filesystem rules, ABI 1); /dev/null and its
  kind, and the GPU's device files, stay usable;
- no TCP connection and no bound port (Landlock ABI 4), no signal to a process outside it and
  its children, no abstract unix socket (ABI 6);
- no socket at all (seccomp: `socket` fails with EACCES, and `io_uring_setup`, whose rings
  can open sockets too), so UDP, unix sockets and TCP Fast Open (a `sendto` that connects,
  which Landlock's TCP rule does not see) are closed as well; `local_sockets=True` lets it
  make unix sockets (a Jupyter kernel talks to its client over them) and netlink ones (ZeroMQ
  lists the machine's interfaces), which reach no other machine.

It needs no user namespace, so it works where bubblewrap cannot: in an unprivileged Docker
container (whose default seccomp profile allows the Landlock calls since moby #43199), and as
an ordinary user. `problem()` says why it cannot work here (gVisor answers ENOSYS; a kernel
built without Landlock or booted without it in `lsm=`, EOPNOTSUPP).

`python -m autograder.runner.landlock CONFIG -- ARGV...` confines itself as the JSON CONFIG
says (`readable`, `writable`, `local_sockets`) and then runs ARGV in its place (a kernel),
with `import_path` first on its PYTHONPATH.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import glob
import json
import os
import platform
import sys
from collections.abc import Iterable

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # the same on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

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
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidia*",
           "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/kfd")

# seccomp: (AUDIT_ARCH_*, socket's number, io_uring_setup's number) per machine.
SECCOMP_ARCH = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}
X32_BIT = 0x40000000  # x86_64's x32 calls: refused whole
AF_UNIX, AF_NETLINK = 1, 16
BPF_LD_W_ABS, BPF_JEQ, BPF_JGE, BPF_RET = 0x20, 0x15, 0x35, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000


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
    `no_landlock` (error: ENOSYS, EOPNOTSUPP), `no_network` (abi, machine: an ABI before 4
    and no seccomp program for this machine). None where it can."""
    version = _version()
    if sys.platform != "linux":
        return "not_linux", {"platform": sys.platform}
    if isinstance(version, str):
        return "no_landlock", {"error": version}
    if version < 4 and platform.machine() not in SECCOMP_ARCH:
        return "no_network", {"abi": version, "machine": platform.machine()}
    return None


def describe() -> str:
    """The layer, as `mha-kit check --verbose` names it."""
    seccomp = "seccomp" if platform.machine() in SECCOMP_ARCH else "no seccomp"
    return f"Landlock ABI {abi()} + {seccomp}"


def _socket_filter(local_sockets: bool) -> list[_SockFilter] | None:
    """A seccomp program refusing `socket` (but for unix and netlink ones where asked),
    `io_uring_setup` and calls of another architecture with EACCES; None on a machine it does
    not know."""
    if platform.machine() not in SECCOMP_ARCH:
        return None
    arch, socket_nr, io_uring_nr = SECCOMP_ARCH[platform.machine()]
    allow, deny = (9, 10) if local_sockets else (6, 7)  # the two returns' places

    def jump(i: int, test: int, k: int, if_true: int | None, if_false: int | None) -> tuple:
        return (test, (if_true or i + 1) - i - 1, (if_false or i + 1) - i - 1, k)

    program = [(BPF_LD_W_ABS, 0, 0, 4),  # 0: the architecture
               jump(1, BPF_JEQ, arch, None, deny),
               (BPF_LD_W_ABS, 0, 0, 0),  # 2: the call's number
               jump(3, BPF_JGE, X32_BIT, deny, None),
               jump(4, BPF_JEQ, io_uring_nr, deny, None)]
    if local_sockets:
        program += [jump(5, BPF_JEQ, socket_nr, None, allow),
                    (BPF_LD_W_ABS, 0, 0, 16),  # 6: its first argument (the family), low half
                    jump(7, BPF_JEQ, AF_UNIX, allow, None),
                    jump(8, BPF_JEQ, AF_NETLINK, allow, deny)]
    else:
        program += [jump(5, BPF_JEQ, socket_nr, deny, allow)]
    program += [(BPF_RET, 0, 0, SECCOMP_RET_ALLOW),
                (BPF_RET, 0, 0, SECCOMP_RET_ERRNO | errno.EACCES)]
    assert len(program) == deny + 1
    return [_SockFilter(*instruction) for instruction in program]


def _add_path(ruleset: int, path: str, rights: int) -> None:
    """A rule for `path` and all beneath it; a path that does not exist here is left out."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                 ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def confine(readable: Iterable[str], writable: Iterable[str], *,
            local_sockets: bool = False) -> None:
    """Confine this process for good (see the module). ConfinementError: a step failed, and the
    caller must stop rather than run student code."""
    if (why := problem()) is not None:
        raise ConfinementError(errno.ENOSYS, f"Landlock cannot confine here: {why}")
    version = abi()
    handled = FS_RIGHTS_BY_ABI.get(version, FS_RIGHTS_BY_ABI[5])
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)
    ruleset = _syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                       ctypes.c_uint32(0))
    try:
        for path in readable:
            _add_path(ruleset, path, READ & handled)
        for path in writable:
            _add_path(ruleset, path, WRITE & handled)
        for path in sorted({p for pattern in DEVICES for p in glob.glob(pattern)}):
            _add_path(ruleset, path, (READ_FILE | WRITE_FILE | IOCTL_DEV) & handled)
        if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        program = _socket_filter(local_sockets)
        if program is not None:
            instructions = (_SockFilter * len(program))(*program)
            fprog = _SockFprog(len(program), instructions)
            if _libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
                raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
        _syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _main(argv: list[str]) -> None:
    """`python -m autograder.runner.landlock CONFIG -- ARGV...` (see the module)."""
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -m autograder.runner.landlock CONFIG -- ARGV...")
    config = json.loads(argv[0])
    try:
        confine(config["readable"], config["writable"], local_sockets=config["local_sockets"])
    except OSError as err:
        sys.exit(f"cannot confine: {err}")
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [config["import_path"], path]))
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    _main(sys.argv[1:])
