"""The assignments, one package each, found by name: `mha_kit/assignments/<name>/`.

A package holds everything of its exercise (docs/architecture.md, "Adding an assignment"):

- `contract.py`: `ENTRIES`, the names a submission defines, with their signatures (data);
- `messages.py`: `TEMPLATES`, its sentences by id, `{"en": {...}, "zh": {...}}` (data);
- its checks, in modules of its own, on the shared machinery of `mha_kit.checks`;
- `points.py`: `CHECKS`, its points table (a `CheckSpec` per graded check, 100 in all);
- `mistakes.py`, if it has mistakes of its own: `CATALOGUE`, their ids (data; each one's
  sentence is its message `mistake.<id>`). The mistakes of attention that several assignments
  name (splitting heads, scaling, masks) are shared, in `checks/diagnosis.py`.

The data modules are read by the lowest layers (`contract`, `messages`), the points tables by
`grading.registry`, each through `catalog.modules(part)`, which finds and loads them by name.
An assignment imports no other assignment. A course's own assignments may live elsewhere: each
folder the `assignments` setting names holds more `<name>/` packages, as in the test that adds
one.
"""
