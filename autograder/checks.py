"""The graded checks. One function per check id in the points table.

Each check draws inputs in the grader's process, asks the `Submission` for the student's
answer, and compares it with `oracle` here. A check either returns the fraction of its
points earned (1.0 for all of them) or raises `CheckFailed` with a message for the student.
"""

from __future__ import annotations

import math
import secrets
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

from . import diagnosis, oracle
from .diagnosis import Candidate, Diagnosis
from .feedback import Dims, describe_mask, describe_mismatch, describe_shape
from .points import ASSIGNMENTS, CHECKS, POINTS
from .submission import Call, ModuleRun, StudentCodeError
from .timing import one_thread

Tensor = torch.Tensor


@dataclass
class Picture:
    """Tensors worth looking at beside a failure: what was expected and what the student gave."""

    title: str
    expected: Tensor
    got: Tensor


class CheckFailed(AssertionError):
    """A check's verdict against the student, with the message to show them.

    With a `diagnosis`, the message starts by naming the known mistake that reproduces the
    student's answer, if one does. The catalogue is tried only when the message is read, so
    a shape search that shrinks through many failures does not pay for it.
    """

    def __init__(self, message: str, picture: Picture | None = None, *,
                 diagnosis: Diagnosis | None = None, case: str = ""):
        super().__init__(message)
        self.picture = picture
        self.diagnosis = diagnosis
        self.case = case

    def __str__(self) -> str:
        mistake = self.diagnosis.mistake if self.diagnosis else None
        text = self.args[0] if mistake is None else f"{mistake.sentence()} {self.args[0]}"
        first, newline, drawing = text.partition("\n")  # a drawn mask stays last
        return f"{first} ({self.case}){newline}{drawing}" if self.case else text


@dataclass
class CheckResult:
    id: str
    score: float
    max_score: int
    message: str
    picture: Picture | None = None

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


@dataclass
class Context:
    """Where and how a run of checks happens."""

    device: str = "cpu"
    salt: str = ""  # another fixed set of inputs, e.g. for nbgrader's hidden tests
    results: dict[str, CheckResult] = field(default_factory=dict)
    notes: str = ""  # a passing check's message, when it has more to say than "ok"

    def generator(self, check_id: str) -> torch.Generator:
        """A fixed seed per check: the same submission always sees the same inputs."""
        return torch.Generator().manual_seed(zlib.crc32((check_id + self.salt).encode()))


# --------------------------------------------------------------------------- tolerances

# float64, moderate logits. Wide enough for a float32 scale constant such as the seed
# tutorial's `1 / torch.sqrt(torch.tensor(d))` (relative error ~3e-8; on outputs near 0,
# where the projections cancel, it leaves up to 1.2e-8 beyond rtol: measured over ~1,000
# module cases), tight enough that any real mistake (all of which move values by 1e-2 or
# more) is far outside.
TIGHT = {"rtol": 1e-6, "atol": 1e-7}
# float64 with logits around 1e3: that same 3e-8 scale error moves a logit by 3e-5, so the
# weights may move by that relative amount. An unstable softmax gives NaN, not 1e-4.
LARGE_LOGITS = {"rtol": 1e-4, "atol": 1e-7}
# float32, compared with a float64 oracle. Measured: correct implementations in every style
# stay under 3e-6 at these sizes (see docs/grading.md).
FLOAT32 = {"rtol": 1e-4, "atol": 2e-5}




def tolerance(dtype: torch.dtype, logit_scale: float = 1.0) -> dict:
    """The tolerance for results of this dtype, with logits scaled by `logit_scale`."""
    if dtype == torch.float32:
        return FLOAT32
    return LARGE_LOGITS if logit_scale > 1 else TIGHT


# --------------------------------------------------------------------------- helpers


def _randn(gen: torch.Generator, *shape: int, device: str, dtype=torch.float64) -> Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)


def _strided(x: Tensor) -> Tensor:
    """The same values, non-contiguous: every other step of a twice-as-long dim 1."""
    doubled = torch.repeat_interleave(x, 2, dim=1)
    return doubled[:, ::2]


def expect_tensor(what: str, got: Any, expected: Tensor, case: str, *, dims: Dims | None = None,
                  mistakes: list[Candidate] | None = None, tol: dict = TIGHT) -> Tensor:
    """Type, shape, dtype and device, each with its own message.

    `dims` names the expected dims for shape messages; `mistakes` are the known mistakes to
    try when the answer is wrong (see `diagnosis`).
    """

    def fail(detail: str) -> CheckFailed:
        found = Diagnosis(got, mistakes, tol) if mistakes else None
        return CheckFailed(f"{what}: {detail}", diagnosis=found, case=case)

    if not isinstance(got, Tensor):
        raise fail(f"should be a tensor of shape {tuple(expected.shape)}, got "
                   f"{type(got).__name__}")
    if got.shape != expected.shape:
        raise fail(describe_shape(tuple(got.shape), tuple(expected.shape), dims))
    if got.dtype != expected.dtype and expected.dtype == torch.bool:
        raise fail(f"has dtype {got.dtype}, expected torch.bool (True = blocked): build it with "
                   "dtype=torch.bool or finish with .bool()")
    if got.dtype != expected.dtype:
        raise fail(f"has dtype {got.dtype} for {expected.dtype} inputs: keep the input's dtype "
                   "(avoid torch.tensor(...) constants that force float32)")
    if got.device != expected.device:
        raise fail(f"is on {got.device} but the inputs are on {expected.device}: create new "
                   "tensors with device=x.device")
    return got


def expect_close(what: str, got: Any, expected: Tensor, case: str, tol: dict, *,
                 dims: Dims | None = None, mistakes: list[Candidate] | None = None,
                 part: int | None = None) -> None:
    """As `expect_tensor`, then the values within `tol`; a mismatch comes with a picture.

    `part` picks the element to compare of mistakes that give (out, weights) pairs.
    """
    if mistakes and part is not None:
        mistakes = [(m, _element(make, part)) for m, make in mistakes]
    got = expect_tensor(what, got, expected, case, dims=dims, mistakes=mistakes, tol=tol)
    expected_64, got_64 = expected.double(), got.double()
    close = torch.isclose(got_64, expected_64, equal_nan=True, **tol)
    if not bool(close.all()):
        raise CheckFailed(
            f"{what}: {describe_mismatch(got_64, expected_64, close, dims)}",
            Picture(f"{what} ({case})", expected, got),
            diagnosis=Diagnosis(got, mistakes, tol) if mistakes else None, case=case,
        )


def float64(params: dict[str, Tensor | None]) -> dict[str, Tensor | None]:
    """The same weights in float64 (None stays None: a missing bias), for the oracle."""
    return {k: None if v is None else v.double() for k, v in params.items()}


def _element(make: Callable[[], Any], index: int) -> Callable[[], Any]:
    return lambda: make()[index]


def attempt(action: Callable[[], Call], case: str,
            mistakes: list[Candidate] | None = None) -> Call:
    """Call into student code; an exception it raises is a failure of this case.

    A known mistake that raises the very same error is named (e.g. x @ weight with a
    non-square weight). Missing names, stubs, timeouts and crashes pass through unchanged.
    """
    try:
        return action()
    except StudentCodeError as err:
        if err.kind != "raised":
            raise
        raise CheckFailed(str(err), diagnosis=Diagnosis(err, mistakes, TIGHT) if mistakes
                          else None, case=case) from None


# --------------------------------------------------------------------------- shape search

# Student errors that may depend on the case, so the search shrinks them; any other (missing,
# not implemented, timeouts, crashes, memory, forbidden calls) ends the search at once.
_SHRINKABLE = ("bad_return", "bad_module", "inputs_after")


def search_shapes(one_case: Callable[[Any], None], shapes: Any, examples: int) -> Any | None:
    """The smallest case drawn from `shapes` that fails, or None.

    A derandomised hypothesis search with no example database, so a grade is the same on
    every run; it shrinks the first failure it finds to a minimal one.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, find, settings
    from hypothesis.errors import NoSuchExample

    fatal: list[StudentCodeError] = []

    def fails(case: Any) -> bool:
        if fatal:
            return False
        try:
            one_case(case)
        except CheckFailed:
            return True
        except StudentCodeError as err:
            if err.kind in _SHRINKABLE:
                return True
            fatal.append(err)
            return False
        return False

    quiet = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                     phases=(Phase.generate, Phase.shrink), verbosity=Verbosity.quiet,
                     suppress_health_check=list(HealthCheck))
    try:
        found = find(shapes, fails, settings=quiet)
    except NoSuchExample:
        found = None
    if fatal:
        raise fatal[0]
    return found


def run_cases(one_case: Callable[[Any], None], fixed: Any, shapes: Any = None,
              examples: int = 20) -> None:
    """A shape search first (its smallest failure is the most telling), then the fixed cases.

    When several mistakes reproduce the smallest failure, the first failing fixed case, with
    its less ambiguous sizes, picks among them.
    """
    with one_thread():
        _run_cases(one_case, fixed, shapes, examples)


def _run_cases(one_case: Callable[[Any], None], fixed: Any, shapes: Any, examples: int) -> None:
    found = None if shapes is None else search_shapes(one_case, shapes, examples)
    if found is not None:
        try:
            one_case(found)
        except CheckFailed as err:
            err.case = f"{err.case or found}; the smallest failing case of a shape search"
            if err.diagnosis and len(err.diagnosis.matches) > 1:
                err.diagnosis.among = _narrow(err.diagnosis.matches, one_case, fixed)
            raise
    for case in fixed:
        one_case(case)


def _narrow(matches: tuple[str, ...], one_case: Callable[[Any], None],
            fixed: Any) -> tuple[str, ...]:
    """The mistakes that also reproduce the failing fixed cases, as far as one does."""
    for case in fixed:
        if len(matches) == 1:
            break
        try:
            one_case(case)
        except CheckFailed as err:
            agreed = tuple(m for m in matches if err.diagnosis and m in err.diagnosis.matches)
            matches = agreed or matches
        except StudentCodeError:
            break
    return matches


def expect_unchanged(name: str, call: Call, originals: tuple[Tensor, ...]) -> None:
    for before, after in zip(originals, call.inputs_after):
        if before.shape != after.shape or not torch.equal(before, after):
            raise CheckFailed(
                f"`{name}` modified its input in place: use out-of-place ops "
                "(masked_fill rather than masked_fill_, x = x * s rather than x *= s)"
            )


def expect_output_pair(name: str, call: Call) -> tuple[Any, Any]:
    if not isinstance(call.value, tuple) or len(call.value) != 2:
        raise CheckFailed(f"`{name}` should return a pair (out, weights), got "
                          f"{type(call.value).__name__}")
    return call.value


# --------------------------------------------------------------------------- step functions


@dataclass(frozen=True)
class Heads:
    """Sizes of one test case, B batch, T (and Tk) tokens, H heads of D features."""

    B: int
    T: int
    H: int
    D: int
    Tk: int | None = None
    strided: bool = False
    dtype: torch.dtype = torch.float64

    @property
    def tol(self) -> dict:
        return tolerance(self.dtype)

    def __str__(self) -> str:
        tk = "" if self.Tk is None else f", Tk={self.Tk}"
        extras = [" non-contiguous input" if self.strided else "",
                  " float32" if self.dtype == torch.float32 else ""]
        return f"B={self.B}, T={self.T}{tk}, H={self.H}, D={self.D}" + ",".join(
            e for e in extras if e
        )


HEAD_CASES = (
    Heads(2, 5, 4, 3),
    Heads(1, 1, 1, 1),
    Heads(3, 7, 2, 8),
    Heads(2, 6, 8, 1),
    Heads(2, 4, 3, 5, strided=True),
    Heads(2, 5, 4, 3, dtype=torch.float32),
)
STEP_EXAMPLES = 12  # shapes the search draws per step function
MODULE_EXAMPLES = 8  # ... and per module


def _heads_shapes(tk: bool = False) -> Any:
    """The search's sizes for the step functions: B, T (and Tk), H and D, 1s included."""
    from hypothesis import strategies as st

    return st.builds(Heads, B=st.integers(1, 3), T=st.integers(1, 5), H=st.integers(1, 4),
                     D=st.integers(1, 4), Tk=st.integers(1, 5) if tk else st.none())


def check_split_heads(sub, ctx: Context) -> float:
    def one_case(c: Heads) -> None:
        x = _randn(ctx.generator(f"split_heads {c}"), c.B, c.T, c.H * c.D, device=ctx.device,
                   dtype=c.dtype)
        x = _strided(x) if c.strided else x
        mistakes = diagnosis.split_heads(x, c.H)
        call = attempt(lambda: sub.call("split_heads", x, c.H), str(c), mistakes)
        expect_close("split_heads(x, num_heads)", call.value, oracle.split_heads(x, c.H),
                     str(c), c.tol, dims=("B", "H", "T", "D"), mistakes=mistakes)
        expect_unchanged("split_heads", call, (x,))

    run_cases(one_case, HEAD_CASES, _heads_shapes(), STEP_EXAMPLES)
    return 1.0


def check_merge_heads(sub, ctx: Context) -> float:
    def one_case(c: Heads) -> None:
        x = _randn(ctx.generator(f"merge_heads {c}"), c.B, c.H, c.T, c.D, device=ctx.device,
                   dtype=c.dtype)
        x = _strided(x) if c.strided else x
        mistakes = diagnosis.merge_heads(x)
        call = attempt(lambda: sub.call("merge_heads", x), str(c), mistakes)
        expect_close("merge_heads(x)", call.value, oracle.merge_heads(x), str(c), c.tol,
                     dims=("B", "T", "H*D"), mistakes=mistakes)
        expect_unchanged("merge_heads", call, (x,))

    run_cases(one_case, HEAD_CASES, _heads_shapes(), STEP_EXAMPLES)
    return 1.0


SCORE_CASES = (
    Heads(2, 5, 4, 3),
    Heads(2, 3, 2, 4, Tk=6),
    Heads(1, 1, 1, 1),
    Heads(2, 4, 3, 16, Tk=2, strided=True),
    Heads(2, 5, 4, 8, dtype=torch.float32),
)


def check_scaled_scores(sub, ctx: Context) -> float:
    def compare(q: Tensor, k: Tensor, case: str, tol: dict) -> None:
        mistakes = diagnosis.scaled_scores(q, k)
        call = attempt(lambda: sub.call("scaled_scores", q, k), case, mistakes)
        dims = ("B", "H", "Tq", "Tk")[4 - q.dim():]
        expect_close("scaled_scores(q, k)", call.value, oracle.scaled_scores(q, k), case, tol,
                     dims=dims, mistakes=mistakes)
        expect_unchanged("scaled_scores", call, (q, k))

    def one_case(c: Heads) -> None:
        gen = ctx.generator(f"scaled_scores {c}")
        q = _randn(gen, c.B, c.H, c.T, c.D, device=ctx.device, dtype=c.dtype)
        k = _randn(gen, c.B, c.H, c.Tk or c.T, c.D, device=ctx.device, dtype=c.dtype)
        q, k = (_strided(q), _strided(k)) if c.strided else (q, k)
        compare(q, k, str(c), c.tol)

    run_cases(one_case, SCORE_CASES, _heads_shapes(tk=True), STEP_EXAMPLES)
    # Leading dims are "...": a plain (B, T, D) input works too.
    gen = ctx.generator("scaled_scores")
    q = _randn(gen, 3, 4, 6, device=ctx.device)
    k = _randn(gen, 3, 7, 6, device=ctx.device)
    compare(q, k, "3-d inputs (B, T, D) with Tq=4, Tk=7", TIGHT)
    return 1.0


def check_causal_mask(sub, ctx: Context) -> float:
    def one_case(seq_len: int) -> None:
        case = f"seq_len={seq_len}"
        expected = oracle.causal_mask(seq_len, device=ctx.device)
        mistakes = diagnosis.causal_mask(seq_len, device=ctx.device)
        call = attempt(lambda: sub.call("causal_mask", seq_len, device=ctx.device), case,
                       mistakes)
        got = expect_tensor(f"causal_mask({seq_len})", call.value, expected, case,
                            dims=("Tq", "Tk"), mistakes=mistakes)
        if not torch.equal(got, expected):
            raise CheckFailed(
                f"causal_mask({seq_len}): True marks a *blocked* pair, query i may not look at "
                f"key j > i; {describe_mask(got, expected)}",
                Picture(f"causal_mask({seq_len})", expected, got),
                diagnosis=Diagnosis(got, mistakes, TIGHT), case=case,
            )

    from hypothesis import strategies as st

    try:
        run_cases(one_case, (1, 2, 5, 16), st.integers(1, 12), STEP_EXAMPLES)
    except CheckFailed as err:
        if err.picture is not None and err.picture.expected.shape[-1] < PICTURED_MASK:
            err.picture = _larger_mask_picture(sub, ctx) or err.picture
        raise
    call = sub.call("causal_mask", 3)
    expect_tensor("causal_mask(3) without device", call.value, oracle.causal_mask(3, "cpu"),
                  "device=None means the default device")
    return 1.0


PICTURED_MASK = 8  # a smaller failing mask is pictured at this size, where a pattern shows


def _larger_mask_picture(sub, ctx: Context) -> Picture | None:
    """The student's mask at PICTURED_MASK tokens beside the expected one, if it is wrong
    there too (the search shrinks a failure to 1 or 2 tokens, too small to see a pattern in)."""
    expected = oracle.causal_mask(PICTURED_MASK, device=ctx.device)
    try:
        got = expect_tensor("causal_mask", sub.call("causal_mask", PICTURED_MASK,
                                                    device=ctx.device).value, expected, "")
    except (CheckFailed, StudentCodeError):
        return None
    return None if torch.equal(got, expected) else Picture(f"causal_mask({PICTURED_MASK})",
                                                           expected, got)


def _allowed_somewhere(gen: torch.Generator, *shape: int, device: str) -> Tensor:
    """A random bool mask (True = blocked) that leaves every row at least one key."""
    blocked = torch.rand(*shape, generator=gen) < 0.4
    blocked[..., 0] = False
    perm = torch.randperm(shape[-1], generator=gen)
    return blocked[..., perm].to(device)


@dataclass(frozen=True)
class Scores:
    """One `attend` case: scores (B, H, Tq, Tk), v (B, H, Tk, D) and a kind of mask."""

    B: int
    H: int
    Tq: int
    Tk: int
    D: int
    mask: str | None = None  # None, "causal" (Tq = Tk), "random" (Tq, Tk), "padding"
    logit_scale: float = 1.0
    dtype: torch.dtype = torch.float64

    def __str__(self) -> str:
        mask = {None: "no mask", "causal": "causal mask (T, T)", "random": "random mask (Tq, Tk)",
                "padding": "padding mask (B, 1, 1, Tk)"}[self.mask]
        extras = [e for e, on in (("logits around 1e3", self.logit_scale > 1),
                                  ("float32", self.dtype == torch.float32)) if on]
        return ", ".join([f"B={self.B}, H={self.H}, Tq={self.Tq}, Tk={self.Tk}, D={self.D}",
                          mask, *extras])

    def draw_mask(self, gen: torch.Generator, device: str) -> Tensor | None:
        if self.mask == "causal":
            return oracle.causal_mask(self.Tq, device=device)
        if self.mask == "random":
            return _allowed_somewhere(gen, self.Tq, self.Tk, device=device)
        if self.mask == "padding":
            return _allowed_somewhere(gen, self.B, 1, 1, self.Tk, device=device)
        return None


ATTEND_CASES = (
    Scores(2, 3, 5, 7, 4),
    Scores(2, 3, 5, 5, 4, "causal"),
    Scores(2, 3, 5, 7, 4, "random"),
    Scores(2, 3, 5, 7, 4, "padding"),
    Scores(2, 3, 5, 5, 4, "causal", logit_scale=1e3),
    Scores(1, 1, 1, 1, 4),
    Scores(2, 3, 5, 5, 4, "causal", dtype=torch.float32),
)


def check_attend(sub, ctx: Context) -> float:
    def one_case(c: Scores) -> None:
        gen = ctx.generator(f"attend {c}")
        scores = _randn(gen, c.B, c.H, c.Tq, c.Tk, device=ctx.device, dtype=c.dtype)
        scores = scores * c.logit_scale
        v = _randn(gen, c.B, c.H, c.Tk, c.D, device=ctx.device, dtype=c.dtype)
        mask = c.draw_mask(gen, ctx.device)
        tol = tolerance(c.dtype)
        expected_out, expected_w = oracle.attend(scores, v, mask)
        mistakes = diagnosis.attend(scores, v, mask)
        call = attempt(lambda: sub.call("attend", scores, v, mask), str(c), mistakes)
        out, weights = expect_output_pair("attend", call)
        expect_close("attend weights", weights, expected_w, str(c), tol,
                     dims=("B", "H", "Tq", "Tk"), mistakes=mistakes, part=1)
        expect_close("attend out", out, expected_out, str(c), tol, dims=("B", "H", "Tq", "D"),
                     mistakes=mistakes, part=0)
        if mask is not None and bool((weights.masked_select(mask.expand_as(weights)) != 0).any()):
            raise CheckFailed("attend weights: blocked positions must be exactly 0", case=str(c))
        expect_unchanged("attend", call, (scores, v) + (() if mask is None else (mask,)))

    from hypothesis import strategies as st

    shapes = st.builds(Scores, B=st.integers(1, 2), H=st.integers(1, 3), Tq=st.integers(1, 4),
                       Tk=st.integers(1, 4), D=st.integers(1, 3),
                       mask=st.sampled_from((None, "random")))
    run_cases(one_case, ATTEND_CASES, shapes, STEP_EXAMPLES)
    return 1.0


@dataclass(frozen=True)
class Projection:
    """One `output_projection` case: x (B, T, d_in), weight (d_out, d_in), maybe a bias."""

    B: int
    T: int
    d_in: int
    d_out: int
    bias: bool = True
    strided: bool = False
    dtype: torch.dtype = torch.float64

    def __str__(self) -> str:
        extras = [e for e, on in (("without bias", not self.bias),
                                  ("non-contiguous x", self.strided),
                                  ("float32", self.dtype == torch.float32)) if on]
        return ", ".join([f"B={self.B}, T={self.T}, {self.d_in} -> {self.d_out}", *extras])


PROJECTION_CASES = (
    Projection(2, 5, 6, 4),
    Projection(2, 3, 3, 8, bias=False),
    Projection(1, 1, 1, 1),
    Projection(2, 4, 5, 5, strided=True),
    Projection(2, 5, 8, 8, dtype=torch.float32),
)


def check_output_projection(sub, ctx: Context) -> float:
    def one_case(c: Projection) -> None:
        gen = ctx.generator(f"output_projection {c}")
        x = _randn(gen, c.B, c.T, c.d_in, device=ctx.device, dtype=c.dtype)
        x = _strided(x) if c.strided else x
        weight = _randn(gen, c.d_out, c.d_in, device=ctx.device, dtype=c.dtype)
        bias = _randn(gen, c.d_out, device=ctx.device, dtype=c.dtype) if c.bias else None
        args = (x, weight) if bias is None else (x, weight, bias)
        mistakes = diagnosis.output_projection(x, weight, bias)
        call = attempt(lambda: sub.call("output_projection", *args), str(c), mistakes)
        tol = tolerance(c.dtype)
        expect_close("output_projection(x, weight, bias)", call.value,
                     oracle.output_projection(x, weight, bias), str(c), tol,
                     dims=("B", "T", "out_features"), mistakes=mistakes)
        expect_unchanged("output_projection", call, args)

    from hypothesis import strategies as st

    shapes = st.builds(Projection, B=st.integers(1, 2), T=st.integers(1, 3),
                       d_in=st.integers(1, 5), d_out=st.integers(1, 5),
                       bias=st.sampled_from((True, False)))
    run_cases(one_case, PROJECTION_CASES, shapes, STEP_EXAMPLES)
    return 1.0


# --------------------------------------------------------------------------- modules


@dataclass(frozen=True)
class Attn:
    """One module test case."""

    B: int
    Tq: int
    E: int
    H: int
    Tk: int | None = None  # None: self-attention, key = value = query
    kdim: int | None = None
    vdim: int | None = None
    bias: bool = True
    mask: str | None = None  # None, "causal" or "random"
    strided: bool = False
    logit_scale: float = 1.0
    dtype: torch.dtype = torch.float64

    @property
    def cross(self) -> bool:
        return self.Tk is not None

    @property
    def tol(self) -> dict:
        return tolerance(self.dtype, self.logit_scale)

    def __str__(self) -> str:
        parts = [f"B={self.B}", f"Tq={self.Tq}" if self.cross else f"T={self.Tq}",
                 f"E={self.E}", f"H={self.H}"]
        if self.cross:
            parts.append(f"Tk={self.Tk}")
        parts += [f"{n}={getattr(self, n)}" for n in ("kdim", "vdim") if getattr(self, n)]
        parts += [p for p, on in (("bias=False", not self.bias),
                                  (f"{self.mask} attn_mask", self.mask),
                                  ("non-contiguous inputs", self.strided),
                                  ("logits around 1e3", self.logit_scale > 1),
                                  ("float32", self.dtype == torch.float32)) if on]
        return ", ".join(parts)


MODULE_CASES = (
    Attn(2, 5, 16, 4),
    Attn(2, 3, 12, 3, Tk=6, kdim=5, vdim=7),
    Attn(1, 1, 4, 1),
    Attn(2, 4, 6, 6),  # D = 1
    Attn(3, 6, 16, 8, mask="causal"),
    Attn(2, 4, 12, 2, bias=False),
    Attn(2, 5, 16, 4, strided=True),
    Attn(2, 5, 16, 4, mask="causal", logit_scale=1e3),
    Attn(2, 5, 16, 4, mask="causal", dtype=torch.float32),
)


@dataclass
class Inputs:
    query: Tensor
    key: Tensor
    value: Tensor
    mask: Tensor | None
    params: dict[str, Tensor | None]  # fused names: q_proj.weight, ..., out_proj.bias


def draw_inputs(c: Attn, gen: torch.Generator, device: str) -> Inputs:
    """Inputs and random weights (biases included) for one case, float64 then c.dtype."""
    tk = c.Tk or c.Tq
    kdim, vdim = c.kdim or c.E, c.vdim or c.E

    def randn(*shape: int) -> Tensor:
        return _randn(gen, *shape, device=device)

    query = randn(c.B, c.Tq, c.E)
    key = randn(c.B, tk, kdim) if c.cross else query
    value = randn(c.B, tk, vdim) if c.cross else query
    params: dict[str, Tensor | None] = {
        "q_proj.weight": randn(c.E, c.E) / math.sqrt(c.E) * c.logit_scale,
        "k_proj.weight": randn(c.E, kdim) / math.sqrt(kdim),
        "v_proj.weight": randn(c.E, vdim) / math.sqrt(vdim),
        "out_proj.weight": randn(c.E, c.E) / math.sqrt(c.E),
    }
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        params[f"{name}.bias"] = randn(c.E) if c.bias else None
    if c.bias and c.logit_scale > 1:
        params["q_proj.bias"] = params["q_proj.bias"] * c.logit_scale
    mask = None
    if c.mask == "causal":
        mask = oracle.causal_mask(c.Tq, device=device)
    elif c.mask == "random":
        mask = _allowed_somewhere(gen, c.Tq, tk, device=device)
    if c.strided:
        query, key, value = _strided(query), _strided(key), _strided(value)
    cast = {k: None if v is None else v.to(c.dtype) for k, v in params.items()}
    return Inputs(query.to(c.dtype), key.to(c.dtype), value.to(c.dtype), mask, cast)


_SAME_MASK: Any = object()


def expected_mha(c: Attn, inp: Inputs, mask: Tensor | None = _SAME_MASK) -> tuple[Tensor, Tensor]:
    """nn.MultiheadAttention's output and per-head weights, computed in float64."""
    params64 = float64(inp.params)
    mha = oracle.torch_mha(params64, c.E, c.H, c.kdim, c.vdim)
    mask = inp.mask if mask is _SAME_MASK else mask
    out, weights = oracle.multi_head_attention(
        mha, inp.query.double(), inp.key.double(), inp.value.double(), mask
    )
    return out.to(c.dtype), weights.to(c.dtype)


def per_head_params(params: dict[str, Tensor | None], num_heads: int) -> dict:
    """The fused weights sliced into `heads.i.{q,k,v}_proj` for a looped module."""
    sliced: dict[str, Tensor | None] = {}
    for i in range(num_heads):
        for name in ("q_proj", "k_proj", "v_proj"):
            weight, bias = params[f"{name}.weight"], params[f"{name}.bias"]
            rows = weight.shape[0] // num_heads
            sliced[f"heads.{i}.{name}.weight"] = weight[i * rows:(i + 1) * rows]
            sliced[f"heads.{i}.{name}.bias"] = (
                None if bias is None else bias[i * rows:(i + 1) * rows]
            )
    sliced["out_proj.weight"] = params["out_proj.weight"]
    sliced["out_proj.bias"] = params["out_proj.bias"]
    return sliced


def _module_kwargs(c: Attn) -> dict[str, Any]:
    return {"kdim": c.kdim, "vdim": c.vdim, "bias": c.bias}


def _mha_mistakes(c: Attn, inp: Inputs, mask: Tensor | None = _SAME_MASK,
                  masks: tuple | list = ()) -> list[Candidate]:
    """The catalogue's versions of this case's (out, weights), computed in float64."""
    params64 = float64(inp.params)
    mask = inp.mask if mask is _SAME_MASK else mask
    return diagnosis.mha(params64, inp.query.double(), inp.key.double(), inp.value.double(),
                         c.H, mask, masks)


def _compare_module(name: str, call: Call, c: Attn, expected: tuple[Tensor, Tensor],
                    inp: Inputs, mistakes: list[Candidate], case: str = "",
                    tol: dict | None = None) -> None:
    case, tol = case or str(c), tol or c.tol
    out, weights = expect_output_pair(f"{name}.forward", call)
    expect_close(f"{name} attention weights", weights, expected[1], case, tol,
                 dims=("B", "H", "Tq", "Tk"), mistakes=mistakes, part=1)
    expect_close(f"{name} output", out, expected[0], case, tol, dims=("B", "Tq", "E"),
                 mistakes=mistakes, part=0)


def _attn_shapes(single_head: bool = False) -> Any:
    """The search's module cases: B, Tq, Tk (cross-attention with kdim and vdim), H, D, bias
    and a mask. Every draw shrinks towards self-attention with a bias and no mask."""
    from hypothesis import strategies as st

    @st.composite
    def cases(draw: Callable) -> Attn:
        H = 1 if single_head else draw(st.integers(1, 3))
        D = draw(st.integers(1, 3))
        B, Tq = draw(st.integers(1, 2)), draw(st.integers(1, 4))
        cross = draw(st.booleans())
        Tk, kdim, vdim = (draw(st.integers(1, 4)), draw(st.none() | st.integers(1, 5)),
                          draw(st.none() | st.integers(1, 5))) if cross else (None, None, None)
        bias = draw(st.sampled_from((True, False)))
        mask = draw(st.sampled_from((None, "random") if cross else (None, "random", "causal")))
        return Attn(B, Tq, H * D, H, Tk, kdim, vdim, bias, mask)

    return cases()


HEAD_MODULE_CASES = (
    Attn(2, 5, 8, 1), Attn(2, 3, 6, 1, Tk=4, kdim=5, vdim=3), Attn(1, 1, 4, 1, bias=False),
    Attn(2, 6, 8, 1, mask="causal"), Attn(2, 5, 8, 1, mask="causal", dtype=torch.float32),
)


def check_attention_head(sub, ctx: Context) -> float:
    def one_case(c: Attn, head_dim: int | None = None) -> None:
        head_dim = head_dim or (3 if c.E % 3 == 0 else 4)
        case = f"{c}, head_dim={head_dim}"
        inp = draw_inputs(c, ctx.generator(f"attention_head {case}"), ctx.device)
        params = {k: v[:head_dim] for k, v in inp.params.items()
                  if k.startswith(("q_", "k_", "v_")) and v is not None}
        params.update({f"{n}.bias": None for n in ("q_proj", "k_proj", "v_proj")
                       if not c.bias})
        args = (inp.query, inp.key, inp.value)
        p64 = float64(params)
        args64 = tuple(a.double() for a in args)
        mistakes = diagnosis.mha(p64, *args64, 1, inp.mask)
        call = attempt(lambda: sub.run_module(ModuleRun(
            "AttentionHead", (c.E, head_dim), _module_kwargs(c), params,
            args, {"attn_mask": inp.mask}, dtype=c.dtype,
        )), case, mistakes)
        out, weights = oracle.attention_head(p64, *args64, inp.mask)
        got_out, got_w = expect_output_pair("AttentionHead.forward", call)
        expect_close("AttentionHead weights", got_w, weights.to(c.dtype), case, c.tol,
                     dims=("B", "Tq", "Tk"), mistakes=mistakes, part=1)
        expect_close("AttentionHead output", got_out, out.to(c.dtype), case, c.tol,
                     dims=("B", "Tq", "head_dim"), mistakes=mistakes, part=0)

    from hypothesis import strategies as st

    shapes = _attn_shapes(single_head=True).flatmap(
        lambda c: st.tuples(st.just(c), st.integers(1, c.E)))
    run_cases(lambda pair: one_case(*pair), [(c, None) for c in HEAD_MODULE_CASES], shapes,
              MODULE_EXAMPLES)
    return 1.0


def _run_mha(sub, class_name: str, c: Attn, inp: Inputs, **forward: Any) -> Call:
    params = per_head_params(inp.params, c.H) if class_name.startswith("Looped") else inp.params
    forward.setdefault("attn_mask", inp.mask)
    return sub.run_module(ModuleRun(
        class_name, (c.E, c.H), _module_kwargs(c), params,
        (inp.query, inp.key, inp.value), forward, dtype=c.dtype,
    ))


def _module_case(sub, ctx: Context, check_id: str, class_name: str) -> Callable[[Attn], None]:
    """One case of a module check: build, load the weights, run, compare with torch."""

    def one_case(c: Attn) -> None:
        inp = draw_inputs(c, ctx.generator(f"{check_id} {c}"), ctx.device)
        mistakes = _mha_mistakes(c, inp)
        call = attempt(lambda: _run_mha(sub, class_name, c, inp), str(c), mistakes)
        _compare_module(class_name, call, c, expected_mha(c, inp), inp, mistakes)
        originals = (inp.query, inp.key, inp.value) + (() if inp.mask is None else (inp.mask,))
        expect_unchanged(f"{class_name}.forward", call, originals)

    return one_case


def check_looped_mha(sub, ctx: Context) -> float:
    one_case = _module_case(sub, ctx, "looped_mha", "LoopedMultiHeadAttention")
    run_cases(one_case, MODULE_CASES, _attn_shapes(), MODULE_EXAMPLES)
    return 1.0


def check_fused_mha(sub, ctx: Context) -> float:
    one_case = _module_case(sub, ctx, "fused_mha", "MultiHeadAttention")
    run_cases(one_case, MODULE_CASES, _attn_shapes(), MODULE_EXAMPLES)
    # key and value default to query.
    c = Attn(2, 5, 16, 4)
    inp = draw_inputs(c, ctx.generator("fused_mha"), ctx.device)
    case = "forward(query) alone: key and value default to query"
    mistakes = _mha_mistakes(c, inp)
    call = attempt(lambda: sub.run_module(ModuleRun("MultiHeadAttention", (c.E, c.H), {},
                                                    inp.params, (inp.query,), {})),
                   case, mistakes)
    out, weights = expect_output_pair("MultiHeadAttention.forward", call)
    expect_close("MultiHeadAttention(query) output", out, expected_mha(c, inp)[0], case, TIGHT,
                 dims=("B", "Tq", "E"), mistakes=mistakes, part=0)
    return 1.0


def check_fused_mha_masks(sub, ctx: Context) -> float:
    gen = ctx.generator("fused_mha_masks")
    c = Attn(2, 6, 12, 4, mask="random")  # D = 3, √E ≠ D: each scaling mistake differs
    inp = draw_inputs(c, gen, ctx.device)
    causal = oracle.causal_mask(c.Tq, device=ctx.device)
    cases = (
        ("attn_mask only", {"attn_mask": inp.mask}, inp.mask),
        ("is_causal=True only", {"attn_mask": None, "is_causal": True}, causal),
        ("attn_mask and is_causal=True: blocked if either blocks", {"is_causal": True},
         inp.mask | causal),
        ("attn_mask=None", {"attn_mask": None}, None),
    )
    with one_thread():
        for case, forward, mask in cases:
            _masks_case(sub, c, inp, case, forward, mask, ctx.device)
    return 1.0


def _masks_case(sub, c: Attn, inp: Inputs, case: str, forward: dict, mask: Tensor | None,
                device: str) -> None:
    """One way of passing masks; the expected mask is `mask`."""
    attn_mask = forward.get("attn_mask", inp.mask)
    wrong_masks = diagnosis.combined_masks(attn_mask, forward.get("is_causal", False), c.Tq,
                                           device)
    mistakes = _mha_mistakes(c, inp, mask, wrong_masks)
    call = attempt(lambda: _run_mha(sub, "MultiHeadAttention", c, inp, **forward), case,
                   mistakes)
    _compare_module("MultiHeadAttention", call, c, expected_mha(c, inp, mask=mask), inp,
                    mistakes, case, TIGHT)
    if attn_mask is not None:
        expect_unchanged("MultiHeadAttention.forward", call,
                         (inp.query, inp.key, inp.value, inp.mask))


def check_fused_mha_contract(sub, ctx: Context) -> float:
    expect_value_error(sub, "MultiHeadAttention", (10, 3), {}, "10 is not divisible by 3 heads")

    gen = ctx.generator("fused_mha_contract")
    c = Attn(2, 5, 12, 4, mask="causal")
    inp = draw_inputs(c, gen, ctx.device)
    expected = expected_mha(c, inp)

    mistakes = _mha_mistakes(c, inp)

    # need_weights=False: the output alone, weights None.
    call = attempt(lambda: _run_mha(sub, "MultiHeadAttention", c, inp, need_weights=False),
                   "need_weights=False", mistakes)
    out, weights = expect_output_pair("MultiHeadAttention.forward", call)
    if weights is not None:
        raise CheckFailed("with need_weights=False, forward should return (out, None)")
    expect_close("MultiHeadAttention output", out, expected[0], "need_weights=False", TIGHT,
                 dims=("B", "Tq", "E"), mistakes=mistakes, part=0)

    # Dropout: none in eval mode, and in training mode on the weights.
    def run(training: bool) -> tuple[Any, Any]:
        return expect_output_pair("MultiHeadAttention.forward", sub.run_module(ModuleRun(
            "MultiHeadAttention", (c.E, c.H), {"dropout": 0.5}, inp.params,
            (inp.query, inp.key, inp.value), {"attn_mask": inp.mask}, training=training,
            seed=0,
        )))

    out, weights = run(training=False)
    expect_close("MultiHeadAttention output", out, expected[0], "dropout=0.5 in eval mode",
                 TIGHT, dims=("B", "Tq", "E"), mistakes=mistakes, part=0)
    out, weights = run(training=True)
    v = oracle.split_heads(F.linear(inp.value, inp.params["v_proj.weight"],
                                    inp.params["v_proj.bias"]), c.H)  # (B, H, Tk, D)
    expect_dropout("MultiHeadAttention", out, weights, expected[1], v, inp.params, 0.5,
                   "dropout=0.5, training")
    return 1.0


def expect_value_error(sub, class_name: str, args: tuple, kwargs: dict, why: str) -> None:
    """Building class_name(*args, **kwargs) raises ValueError, because `why`. Other failures
    of the student's code (missing, a stub, a timeout, a crash) are reported as they are."""
    call = f"{class_name}({', '.join([*map(str, args), *(f'{k}={v}' for k, v in kwargs.items())])})"
    try:
        sub.check_constructor(class_name, *args, **kwargs)
    except StudentCodeError as err:
        if err.kind != "raised":
            raise
        if err.exc_type != "ValueError":
            raise CheckFailed(f"{call} should raise ValueError ({why}), but: {err}") from None
    else:
        raise CheckFailed(f"{call} should raise ValueError: {why}")


def expect_dropout(name: str, out: Any, weights: Any, expected_weights: Tensor, v: Tensor,
                   params: dict[str, Tensor | None], p: float, case: str) -> None:
    """Dropout p in training mode, on the attention weights: each weight the softmax gives is
    either dropped (0) or scaled by 1 / (1 - p), some are dropped, and `out` mixes the values
    v (B, H, Tk, Dv) with the weights returned, then applies out_proj from `params`."""
    weights = expect_tensor(f"{name} attention weights", weights, expected_weights, case)
    kept = weights != 0
    if bool(kept[expected_weights != 0].all()):
        raise CheckFailed(f"dropout={p:g} in training mode dropped no attention weight: apply "
                          "nn.Dropout to the weights (it is active only in train())", case=case)
    if not torch.allclose(weights[kept], expected_weights[kept] / (1 - p), **TIGHT):
        raise CheckFailed("dropout in training mode: the weights you return should be the ones "
                          "you used, each either 0 or softmax / (1 - p)", case=case)
    mixed = oracle.output_projection(oracle.merge_heads(weights @ v), params["out_proj.weight"],
                                     params["out_proj.bias"])  # (B, Tq, out_dim)
    expect_close(f"{name} output", out, mixed, f"{case}: out must use the dropped-out weights",
                 TIGHT)


# On CPU the reported times are the worker's CPU time in the timed calls. The grader reads the
# worker's whole CPU time from outside; honest runs report 0.76-0.96 of it, under load too,
# a clock rewound in forward 0.17-0.39 (docs/trusted-grading.md).
MIN_TIMED_SHARE = 0.6
SPEED_GATE = "timed only once MultiHeadAttention matches nn.MultiheadAttention (see fused_mha)"


@dataclass
class TimedRun:
    """The student's timing run, with what the grader saw of it from outside."""

    measurement: Any  # what the run reported (see timing.measure_speed); trusted in nothing
    wall: float  # seconds the grader waited for it
    cpu: float | None  # CPU seconds the student's process used meanwhile, where readable


def timed_run(sub, device: str, seed: int) -> TimedRun:
    sub.ensure_loaded()  # a worker restarted after an earlier check: not part of the timing
    cpu_before = sub.cpu_seconds()
    started = time.perf_counter()
    measurement = sub.time_speed(device, seed)
    wall = time.perf_counter() - started
    cpu_after = sub.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return TimedRun(measurement, wall, cpu)


def check_speed(sub, ctx: Context) -> float:
    from .timing import score_speed, total_measured

    gate = ctx.results.get("fused_mha")
    if gate is None:
        gate = run_check("fused_mha", sub, ctx)
    if not gate.passed:
        raise CheckFailed(SPEED_GATE)
    seed = secrets.randbelow(2**31)
    run = timed_run(sub, ctx.device, seed)
    fraction, message = score_speed(run.measurement, ctx.device, seed)
    if fraction <= 0:
        raise CheckFailed(message)
    reported = total_measured(run.measurement)
    if reported > run.wall * 1.05:
        raise CheckFailed(f"speed not scored: the reported times add up to more than the "
                          f"{run.wall:.2f} s the measurement took")
    if ctx.device == "cpu" and run.cpu is not None and reported < MIN_TIMED_SHARE * run.cpu:
        raise CheckFailed(f"speed not scored: the reported times add up to {reported:.2f} s "
                          f"but the timing run used {run.cpu:.2f} s of CPU time "
                          "(a slow constructor or first call, or a patched clock?)")
    ctx.notes = message
    return fraction


CHECK_FUNCTIONS: dict[str, Callable[[Any, Context], float]] = {
    "split_heads": check_split_heads,
    "scaled_scores": check_scaled_scores,
    "causal_mask": check_causal_mask,
    "attend": check_attend,
    "merge_heads": check_merge_heads,
    "output_projection": check_output_projection,
    "attention_head": check_attention_head,
    "looped_mha": check_looped_mha,
    "fused_mha": check_fused_mha,
    "fused_mha_masks": check_fused_mha_masks,
    "fused_mha_contract": check_fused_mha_contract,
    "speed_fused_vs_looped": check_speed,
}
assert set(CHECK_FUNCTIONS) == {c.id for c in CHECKS}, "every check in the table has a function"


def _check_function(check_id: str) -> Callable[[Any, Context], float]:
    """The function of any assignment's check; the other tables' modules import this one."""
    if check_id in CHECK_FUNCTIONS:
        return CHECK_FUNCTIONS[check_id]
    from . import extension_checks, shapes_checks

    return {**extension_checks.CHECK_FUNCTIONS, **shapes_checks.CHECK_FUNCTIONS}[check_id]


def run_check(check_id: str, sub, ctx: Context | None = None) -> CheckResult:
    """Run one check; whatever the student's code does, return a result."""
    ctx = ctx or Context()
    points = POINTS[check_id]
    ctx.notes = ""
    sub.start_check(check_id)
    try:
        fraction = _check_function(check_id)(sub, ctx)
        message = ctx.notes or "ok"
    except (CheckFailed, StudentCodeError) as err:
        fraction, message = 0.0, str(err)
        picture = getattr(err, "picture", None)
    else:
        picture = None
    result = CheckResult(check_id, round(points * fraction, 2), points, message, picture)
    ctx.results[check_id] = result
    return result


def run_checks(sub, only: list[str] | None = None, device: str = "cpu",
               on_result: Callable[[CheckResult], None] | None = None,
               assignment: str = "mha") -> list[CheckResult]:
    """Run an assignment's checks in points-table order (all of them, or those in `only`)."""
    ctx = Context(device=device)
    results = []
    for spec in ASSIGNMENTS[assignment]:
        if only and spec.id not in only:
            continue
        result = run_check(spec.id, sub, ctx)
        results.append(result)
        if on_result:
            on_result(result)
    return results
