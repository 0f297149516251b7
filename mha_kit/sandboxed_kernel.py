"""The student's kernel under nbgrader, in the sandbox that holds the kit's workers.

`nbgrader autograde` runs the submitted notebook in a Jupyter kernel, as the account running
nbgrader. `SandboxedExecute` is nbgrader's `Execute` with a `SandboxedKernelManager`, whose
kernel runs in the sandbox's layers (`runner.sandbox`): confined by Landlock's launcher, and
under bwrap where it runs. No network, and writable only a scratch folder: its sockets, its
HOME, and a copy of its working folder (the notebook's folder), so the notebook reads the files
beside it and what it writes there is thrown away with the copy. bwrap mounts the copy at the
folder's own path; with Landlock alone the kernel works in the copy. When the grader is root
and `worker_user` names an account (`nobody`), the kernel runs as that account too
(`setpriv`, inside the sandbox). Its files take no more disk than a worker's may
(`runner.disk`: those of the scratch folder, and those the kernel and its children hold
without a name): past the limit the kernel is stopped, and the cell says why.

It may open no TCP connection (bwrap's network namespace has only its own loopback, Landlock
allows unix sockets alone), so the kernel talks to nbclient over ZMQ's `ipc` transport (unix
sockets in the scratch folder) instead of TCP. Interrupts go as messages:
a SIGINT to the kernel's process group would reach bwrap, which would die and take the kernel
with it. Where there is no sandbox, the kernel runs as usual and the log says why.

Enable it in nbgrader_config.py by naming `SandboxedStudentCells` in place of `StudentCells`
in `c.Autograde.autograde_preprocessors` (`SandboxedExecute` in place of a plain `Execute`).
`c.Execute.kernel_manager_class` does not work: nbgrader's Execute passes its own class to the
constructor, which wins over the configuration.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from nbgrader.preprocessors import Execute

from .messages import render
from .runner import fonts, sandbox
from .runner.disk import DiskWatch
from .runner.policy import Limits, worker_user
from .trusted_autograde import StudentCells


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel in the sandbox, talking over unix sockets, under the disk limit (see the
    module)."""

    _scratch: Path | None = None
    _account: tuple[int, int] | None = None  # the kernel's, where it is not the grader's
    _watch: DiskWatch | None = None
    _disk_gib = 0.0

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        unprotected = sandbox.unprotected()
        if unprotected is not None:
            self.log.warning(render(unprotected))
            return await super()._async_pre_start_kernel(**kw)
        cwd = Path(kw.get("cwd") or os.getcwd()).resolve()
        if self._scratch is None:  # a restart keeps the scratch folder and its copy
            self._scratch = Path(tempfile.mkdtemp(prefix="mha-kit-kernel-"))
            shutil.copytree(cwd, self._scratch / "work", symlinks=True)
            (self._scratch / "home" / ".matplotlib").mkdir(parents=True)
            fonts.seed(self._scratch / "home" / ".matplotlib")
        scratch, home = self._scratch, self._scratch / "home"
        self.transport, self.ip = "ipc", str(scratch / "kernel")  # sockets kernel-1, ...
        self.connection_file = str(scratch / "kernel.json")
        self.kernel_spec.interrupt_mode = "message"
        env = sandbox.with_settings(sandbox.without_grader_paths(kw.get("env") or os.environ))
        kw["env"] = {**env, "HOME": str(home), "TMPDIR": str(home),
                     "IPYTHONDIR": str(home / ".ipython"),
                     "MPLCONFIGDIR": str(home / ".matplotlib")}
        command, kw = await super()._async_pre_start_kernel(**kw)
        kernel = [*self._as_account(scratch), *command]
        binds = [(scratch, scratch), (scratch / "work", cwd)]

        def confined(writable: list[Path]) -> list[str]:  # a root kernel without setpriv: no caps
            return sandbox.confined(kernel, writable, kit_link=scratch / "kit",
                                    drop_capabilities=kernel == command)

        wrapped = sandbox.wrap(confined([dest for _, dest in binds]), binds,
                               setuid=kernel != command, chdir=cwd)
        if wrapped is None:  # Landlock alone: the copy cannot stand at the folder's own path
            kw["cwd"] = str(scratch / "work")
            return confined([scratch]), kw
        return wrapped, kw

    def _as_account(self, scratch: Path) -> list[str]:
        """The `setpriv` prefix that runs the kernel as `worker_user()`, who then owns the
        scratch folder; [] to keep the grader's account."""
        user = worker_user()
        if not user:
            return []
        entry = pwd.getpwnam(user)
        self._account = entry.pw_uid, entry.pw_gid
        for folder, _, files in os.walk(scratch):
            for path in (folder, *(os.path.join(folder, name) for name in files)):
                os.lchown(path, entry.pw_uid, entry.pw_gid)
        # bwrap enters the copy (--chdir) as a root without CAP_DAC_OVERRIDE, before setpriv
        # switches: passable to all, as the copy of a 0700 folder is not.
        work = scratch / "work"
        work.chmod(work.stat().st_mode | 0o111)
        return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                "--clear-groups", "--"]

    async def _async_post_start_kernel(self, **kw: Any) -> None:
        await super()._async_post_start_kernel(**kw)
        if self._scratch is not None:  # in the sandbox
            self._disk_gib = Limits.from_settings().disk_gib
            leader = self.provisioner.pid  # type: ignore[union-attr, attr-defined]
            self._watch = DiskWatch(self._scratch, leader, int(self._disk_gib * 2**30),
                                    self._account)  # leader: bwrap, or the kernel itself

    @property
    def disk_limit_passed(self) -> float | None:
        """The disk limit (GiB) the kernel was stopped at (`StudentCells` says so); None if
        it was not."""
        return self._disk_gib if self._watch is not None and self._watch.exceeded else None

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        if self._watch is not None:
            self._watch.stop()
        await super()._async_cleanup_resources(restart)
        if not restart and self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # jupyter_client binds this name to its own method, which nbclient calls for a kernel that
    # died: the scratch folder would stay behind.
    cleanup_resources = _async_cleanup_resources


class _KernelInSandbox:
    """An Execute preprocessor whose kernel is a `SandboxedKernelManager`: nbgrader's Execute
    passes its own class to the constructor, so this sets it first."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)


class SandboxedExecute(_KernelInSandbox, Execute):
    """nbgrader's Execute, its kernel in the sandbox."""


class SandboxedStudentCells(_KernelInSandbox, StudentCells):
    """The kit's StudentCells (`trusted_autograde`), its kernel in the sandbox."""
