"""Hostile notebooks for the nbgrader path: every way a submission can try to decide its own
grade or harm the course (an `Attack`), graded by real `nbgrader autograde` in conftest's
`course`.

Each attack is a cell added after the first cell of a submission of the core assignment: the
release ("empty": nothing implemented) or the release with every answer pasted in
("complete"). Attacks that one defence stops are handed in together, in one notebook (its
`notebook`): those that claim points the code did not earn, and those that write outside their
folder. A kernel killed or hung stops the cells after it, so each of those has a notebook of its
own. A notebook earns what its code earns: 0 on an empty base, full marks on a complete one.
Cells that write try every place outside their scratch folder (the course folder, gradebook.db,
another student's submission, the kit, HOME, /tmp), named by `targets`; `written_outside` finds
any that got through. Cells that act only in a Jupyter kernel (`IN_KERNEL`) leave the kit's
worker, which loads the same cells, unharmed, so the grade shows what nbgrader did with it.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path

import nbformat

IN_KERNEL = '"ipykernel" in __import__("sys").modules'
MARK = "pwned-by-{name}"


CLAIMS, WRITES = "claims_points", "writes_outside"  # the notebooks that hold several attacks


@dataclass(frozen=True)
class Attack:
    name: str
    base: str  # "empty" or "complete"
    cell: str  # the added cell; {course}, {kit} and {mark} are filled in
    what: str  # what it tries, for a reader of the test
    writes: bool = False  # it writes outside its folder: only where the sandbox can stop it
    notebook: str = ""  # the notebook it is handed in with ("": one of its own)

    @property
    def student(self) -> str:
        return f"hostile-{self.notebook or self.name}"


CASES = (
    Attack("defines_check", "empty",
                    'def check(check_id, hidden=False):\n'
                    '    print(f"✓ {{check_id}}: 10/10 ok")\n'
                    '    return 10\n',
                    "a function named check that prints ✓ and returns the points", notebook=CLAIMS),
    Attack("patches_autograder", "empty",
                    "import mha_kit.grading.registry as registry\n"
                    "import mha_kit.notebook as notebook\n"
                    "fake = lambda check_id, *a, **k: registry.CheckResult(\n"
                    "    check_id, 10, 10, 'ok')\n"
                    "registry.run_check = notebook.run_check = fake\n"
                    "notebook.check = lambda *a, **k: 10\n",
                    "patches the kit's modules in the kernel", notebook=CLAIMS),
    Attack("swallows_exceptions", "empty",
                    "get_ipython().set_custom_exc((BaseException,),\n"
                    "                             lambda *args, **kwargs: None)\n",
                    "swallows every exception, failed checks included", notebook=CLAIMS),
    Attack("prints_fake_pass", "empty",
                    'for name in ("split_heads", "scaled_scores", "fused_mha"):\n'
                    '    print(f"✓ {{name}}: 10/10 ok")\n',
                    "prints ✓ lines of its own", notebook=CLAIMS),
    Attack("returns_points", "empty",
                    "points = 100\npoints\n",
                    "a cell whose value is the points", notebook=CLAIMS),
    Attack("kills_kernel", "complete",
                    f"if {IN_KERNEL}:\n"
                    "    import os, signal\n"
                    "    os.kill(os.getpid(), signal.SIGKILL)\n",
                    "kills its kernel half way"),
    Attack("loops_forever", "complete",
                    f"while {IN_KERNEL}:\n    __import__('time').sleep(1)  # no core kept busy\n",
                    "loops forever in the kernel"),
    Attack("fills_disk", "complete",
                    "chunk = b'x' * 2**20\n"
                    "for place in ('filler.bin', '{course}/filler.bin', '/tmp/{mark}.bin'):\n"
                    "    try:\n"
                    "        with open(place, 'wb') as out:\n"
                    "            for _ in range(256):\n"
                    "                out.write(chunk)\n"
                    "    except OSError:\n"
                    "        pass\n",
                    "writes 256 MiB into its folder, the course and /tmp", writes=True,
           notebook=WRITES),
    Attack("writes_gradebook", "complete",
                    "try:\n"
                    "    with open('{course}/gradebook.db', 'r+b') as db:\n"
                    "        db.write(b'{mark}')\n"
                    "except OSError:\n"
                    "    pass\n",
                    "overwrites the start of gradebook.db", writes=True, notebook=WRITES),
    Attack("tampers_with_others", "complete",
                    "import pathlib\n"
                    "targets = [*pathlib.Path('{course}/submitted').glob('*/mha/*.ipynb'),\n"
                    "           pathlib.Path('{course}/{mark}.txt'),\n"
                    "           pathlib.Path('{kit}/{mark}.py'),\n"
                    "           pathlib.Path.home() / '{mark}.txt',\n"
                    "           pathlib.Path('/tmp/{mark}.txt')]\n"
                    "for target in targets:\n"
                    "    try:\n"
                    "        target.write_text('{mark}')\n"
                    "    except OSError:\n"
                    "        pass\n",
                    "writes into other submissions, the course, the kit, HOME and /tmp",
                    writes=True, notebook=WRITES),
)
BY_NAME = {case.name: case for case in CASES}


def cases() -> tuple[Attack, ...]:
    """The attacks to grade here: those that write outside their folder only where the sandbox
    runs (without it, nothing would stop them writing into this checkout and HOME)."""
    from mha_kit.runner import sandbox

    protected = sandbox.unprotected() is None
    return tuple(case for case in CASES if protected or not case.writes)


def submissions(attacks: tuple[Attack, ...]) -> dict[str, tuple[Attack, ...]]:
    """student -> the attacks in the notebook that student hands in, in CASES' order."""
    found: dict[str, tuple[Attack, ...]] = {}
    for attack in attacks:
        found[attack.student] = (*found.get(attack.student, ()), attack)
    return found


def build(attacks: tuple[Attack, ...], bases: dict[str, nbformat.NotebookNode], course: Path,
          kit: Path) -> nbformat.NotebookNode:
    """One student's notebook: its base with the attacks' cells added after the first cell."""
    (base,) = {attack.base for attack in attacks}
    nb = copy.deepcopy(bases[base])
    for at, attack in enumerate(attacks, start=1):
        source = attack.cell.format(course=course, kit=kit, mark=MARK.format(name=attack.name))
        nb.cells.insert(at, nbformat.v4.new_code_cell(source, id=f"hostile-{attack.name}"))
    return nb


def targets(course: Path, kit: Path, home: Path) -> list[Path]:
    """Every file a case tries to create outside its scratch folder."""
    found = []
    for case in CASES:
        mark = MARK.format(name=case.name)
        found += [course / f"{mark}.txt", kit / f"{mark}.py", home / f"{mark}.txt",
                  Path(f"/tmp/{mark}.txt"), Path(f"/tmp/{mark}.bin")]
    return [*found, course / "filler.bin"]


def fingerprint(paths: list[Path]) -> dict[str, str]:
    """sha256 of each file that exists among `paths`."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}
