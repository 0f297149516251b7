"""The Gradescope autograder: `run_autograder` and `setup.sh` beside this file (package data),
and the zip to upload that carries them (`mha-kit gradescope`; docs/trusted-grading.md).

The zip holds, at its root, `run_autograder`, `setup.sh`, `assignment` (the one it grades),
`hidden_visibility` and, where the course has one, `secret`; in `mha-kit/`, the kit's source
that setup.sh installs: the running kit's package folder and a pyproject.toml. From a checkout
that is the checkout's own (with the README it names); from a pip install, one written from
the installed distribution's metadata, so the zip never needs a checkout.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

from ..course_layout import PACKAGED
from ..runner.kit_distribution import DISTRIBUTION

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent  # the running kit's mha_kit/
CHECKOUT = PACKAGE.parent  # a checkout's root, where the kit runs from one
SCRIPTS = ("run_autograder", "setup.sh")
SOURCE = "mha-kit"  # the kit's folder in the zip: setup.sh installs /autograder/source/mha-kit
EXTRAS = ("triton",)  # the extras setup.sh installs
SKIPPED = {"__pycache__", ".ipynb_checkpoints", PACKAGED}  # course files: no use to Gradescope
# An extra's clause in a Requires-Dist marker, as setuptools writes it (last): `; extra == "x"`.
EXTRA_CLAUSE = re.compile(r"""\s*(?:\band\s+)?\bextra\s*==\s*["']([\w.-]+)["']""")
EXECUTABLE, PRIVATE = 0o755, 0o600


def pyproject_from_metadata(metadata: importlib.metadata.PackageMetadata) -> str:
    """A pyproject.toml that builds the kit as `metadata` describes it: its name, version,
    Python, dependencies and `EXTRAS`, with the checkout's build backend and discovery."""
    dependencies: list[str] = []
    extras: dict[str, list[str]] = {extra: [] for extra in EXTRAS}
    for requirement in metadata.get_all("Requires-Dist") or []:
        clause = EXTRA_CLAUSE.search(requirement)
        if clause is None:
            dependencies.append(requirement)
        elif clause.group(1) in extras:
            extras[clause.group(1)].append(EXTRA_CLAUSE.sub("", requirement).rstrip("; "))

    def array(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(item) for item in items) + "]"

    lines = ['[build-system]', 'requires = ["setuptools>=64"]',
             'build-backend = "setuptools.build_meta"', "", "[project]",
             f"name = {json.dumps(metadata['Name'])}",
             f"version = {json.dumps(metadata['Version'])}"]
    if metadata["Requires-Python"]:
        lines.append(f"requires-python = {json.dumps(metadata['Requires-Python'])}")
    lines += [f"dependencies = {array(dependencies)}", "",
              "[project.optional-dependencies]",
              *(f"{extra} = {array(requirements)}" for extra, requirements in extras.items()),
              "", "[tool.setuptools.packages.find]", 'include = ["mha_kit*"]', "",
              "[tool.setuptools.package-data]", f'"mha_kit.gradescope" = {array(list(SCRIPTS))}']
    return "\n".join(lines) + "\n"


def project_files() -> dict[str, bytes]:
    """The files beside the package in the zip's `mha-kit/`: the checkout's pyproject.toml and
    README.md, else a pyproject.toml from the installed distribution's metadata."""
    if (CHECKOUT / "pyproject.toml").is_file():
        return {name: (CHECKOUT / name).read_bytes() for name in ("pyproject.toml", "README.md")}
    metadata = importlib.metadata.metadata(DISTRIBUTION)
    return {"pyproject.toml": pyproject_from_metadata(metadata).encode()}


def package_files(folder: Path = PACKAGE) -> Iterator[Path]:
    """The package's files, but for bytecode and the course files (`SKIPPED`)."""
    for path in sorted(folder.iterdir()):
        if path.name in SKIPPED or path.suffix == ".pyc":
            continue
        if path.is_dir():
            yield from package_files(path)
        else:
            yield path


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.create_system = 3  # unix, wherever it is built: else the modes below are not read
    info.external_attr = (0o100000 | mode) << 16  # a regular file with this mode
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def write_zip(out: Path, assignment: str, hidden_visibility: str, secret: str) -> None:
    """Write the autograder zip for `assignment` to `out` (see the module); `secret` in it
    only where not empty."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as archive:
        for script in SCRIPTS:
            _add(archive, script, (HERE / script).read_bytes(), EXECUTABLE)
        _add(archive, "assignment", f"{assignment}\n".encode())
        _add(archive, "hidden_visibility", f"{hidden_visibility}\n".encode())
        if secret:
            _add(archive, "secret", f"{secret}\n".encode(), PRIVATE)
        for name, data in project_files().items():
            _add(archive, f"{SOURCE}/{name}", data)
        for path in package_files():
            _add(archive, f"{SOURCE}/{path.relative_to(CHECKOUT).as_posix()}", path.read_bytes(),
                 EXECUTABLE if path.name in SCRIPTS else 0o644)
