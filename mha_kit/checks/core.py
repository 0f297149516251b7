"""What every check shares: results, failures with their message and picture, the context of
a run, and the tolerances. A check either returns the fraction of its points earned (1.0 for
all of them) or raises `CheckFailed` with a message for the student.
"""

from __future__ import annotations

import dataclasses
import hmac
import zlib
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import settings
from ..messages import Message, msg
from .diagnosis import Diagnosis

Tensor = torch.Tensor


@dataclass
class Picture:
    """Tensors worth looking at beside a failure: what was expected and what the student gave.

    With `cells`, each number is a label, token·100 + head·10 + feature (`grading.pictures`
    writes "t2 h1 f0" in its cell), and `source` is the labelled input: how numbers moved.
    `dims` names the tensors' dims, when known: a heatmap per index of the third dim from the
    end says which dim it is (a head, or a batch element).
    """

    title: Message | str
    expected: Tensor
    got: Tensor
    cells: bool = False
    source: Tensor | None = None
    dims: tuple[str, ...] = ()


class CheckFailed(AssertionError):
    """A check's verdict against the student: `text` says what is wrong, `case` names the test
    case, `drawing` (a drawn mask) comes last; `message` puts them together.

    With a `diagnosis`, the message starts by naming the known mistake that reproduces the
    student's answer, if one does. The catalogue is tried only when the message is read, so
    a shape search that shrinks through many failures does not pay for it.
    """

    def __init__(self, text: Message | str, picture: Picture | None = None, *,
                 diagnosis: Diagnosis | None = None, case: Message | str | list = "",
                 drawing: Message | None = None, exc_type: str | None = None):
        super().__init__(text)
        self.text = text
        self.picture = picture
        self.diagnosis = diagnosis
        self.case = case
        self.drawing = drawing
        self.exc_type = exc_type  # the student's code raised this (`expect.attempt`)
        self.warnings: list[Message] = []  # what PyTorch warned about in the student's code

    @property
    def message(self) -> Message | str:
        message = self.summary
        if self.drawing is not None:
            message = msg("check.drawing", text=message, drawing=self.drawing)
        return message

    @property
    def summary(self) -> Message | str:
        """The message without its drawing: the mistake, what is wrong, the case."""
        sentence = self.diagnosis.sentence() if self.diagnosis else None
        message = self.text if sentence is None else msg("check.mistake", mistake=sentence,
                                                         text=self.text)
        if self.case:
            message = msg("check.case", text=message, case=self.case)
        return with_warnings(message, self.warnings)

    def __str__(self) -> str:
        return str(self.message)


def with_warnings(message: Message | str, warnings: list[Message]) -> Message | str:
    """A failure's message followed by what PyTorch warned about in the student's code: the one
    way a warning joins a result, whether a check or the student's code failed."""
    for warned in warnings:
        message = msg("check.warned", text=message, warned=warned)
    return message


@dataclass
class CheckResult:
    id: str
    score: float
    max_score: int
    message: Message | str  # rendered when shown (`messages.render`)
    picture: Picture | None = None

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


HIDDEN_SALT = "hidden"  # nbgrader's hidden tests: the same checks on other fixed inputs


@dataclass
class Context:
    """Where and how a run of checks happens."""

    device: str = "cpu"
    salt: str = ""  # another fixed set of inputs: HIDDEN_SALT for nbgrader's hidden tests
    results: dict[str, CheckResult] = field(default_factory=dict)
    notes: Message | None = None  # a passing check's message, when it has more than "ok"
    answered: set[str] = field(default_factory=set)  # contract names seen running, so far

    def generator(self, check_id: str, *case: Any) -> torch.Generator:
        """A fixed seed per check and case: the same submission always sees the same inputs.
        The seed is made of data (`seed_text`), never of a message's words; with the course's
        `secret` set, it is keyed by it (HMAC-SHA256), so that inputs recorded with the public
        kit are not the ones graded, nor can the secret be worked back from them."""
        key = (" ".join([check_id, *map(seed_text, case)]) + self.salt).encode()
        seed = secret_seed(key)
        return torch.Generator().manual_seed(zlib.crc32(key) if seed is None else seed)


def secret_seed(key: bytes) -> int | None:
    """A 64-bit seed for `key`, keyed by the course's `secret` setting (HMAC-SHA256); None
    when no secret is set (the public inputs)."""
    secret = settings.read("secret")
    if not secret:
        return None
    return int.from_bytes(hmac.digest(secret.encode(), key, "sha256")[:8], "big")


def seed_text(part: Any) -> str:
    """A part of a seed: a case (or a Message naming one) by its fields, anything else by repr;
    rewording or translating a template changes no input."""
    if dataclasses.is_dataclass(part) and not isinstance(part, type):
        return "(" + ", ".join(f"{f.name}={seed_text(getattr(part, f.name))}"
                               for f in dataclasses.fields(part)) + ")"
    return repr(part)


# --------------------------------------------------------------------------- tolerances

# float64, moderate logits. Wide enough for float32 anywhere inside a float64 computation,
# which is right: a float32 constant (the seed tutorial's `1 / torch.sqrt(torch.tensor(d))`),
# or a softmax taken in float32 and cast back, as Hugging Face transformers
# (`softmax(..., dtype=torch.float32).to(dtype)`) and fairseq (the same softmax, then
# `.type_as(x)`) write it. Measured (docs/grading.md): such submissions pass every check from
# 5e-6 on, and fail some at 2e-6 (gradients sum float32 rounding over tokens and rows); real
# mistakes move values by 1e-2 or more.
TIGHT = {"rtol": 2e-5, "atol": 2e-5}
# float64 with logits around 1e3: a float32 logit is then off by up to 1e-4, and the weights
# by that relative amount. An unstable softmax gives NaN, not 1e-3.
LARGE_LOGITS = {"rtol": 1e-3, "atol": 2e-5}
# float32, compared with a float64 oracle. Measured: correct implementations in every style
# stay under 3e-6 at these sizes (see docs/grading.md).
FLOAT32 = {"rtol": 1e-4, "atol": 2e-5}


def tolerance(dtype: torch.dtype, logit_scale: float = 1.0) -> dict:
    """The tolerance for results of this dtype, with logits scaled by `logit_scale`."""
    if dtype == torch.float32:
        return FLOAT32
    return LARGE_LOGITS if logit_scale > 1 else TIGHT

