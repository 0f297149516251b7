"""The student contract: every name a submission of some assignment defines, with its signature.

Each assignment declares its own in `assignments/<name>/contract.py`; this gathers them for the
runner (which names are the student's, what to say of a missing one). What each name must do is
in the README's contract table and docs/grading.md.
"""

from __future__ import annotations

from .catalog import Entry, claimed_once, modules

# A name is declared by one assignment: one that declares another's again is left out.
ENTRIES: dict[str, Entry] = {
    entry.name: entry
    for contract in claimed_once(modules("contract"), lambda c: (e.name for e in c.ENTRIES),
                                 "contract.py redeclares contract names").values()
    for entry in contract.ENTRIES
}


def signature_of(name: str) -> str:
    """The documented signature of a contract name, for messages."""
    return ENTRIES[name].signature
