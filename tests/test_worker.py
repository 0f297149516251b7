"""The worker's mechanics: what may come back through the pipe, restarts, limits, the
temporary folder and the account student code runs as."""

from __future__ import annotations

import fcntl
import io
import os
import pickle
import struct
import subprocess
import sys
import time

import pytest
import torch
from conftest import HOSTILE
from torch import nn

from mha_kit import settings
from mha_kit.grading.registry import run_check
from mha_kit.messages import msg
from mha_kit.runner import fonts
from mha_kit.runner.framing import (
    HEADER,
    MAX_MESSAGE,
    MAX_PICKLE,
    _nbytes,
    encode,
    frame,
    receive,
    write_all,
)
from mha_kit.runner.inprocess import vetted
from mha_kit.runner.policy import Limits, worker_user
from mha_kit.runner.protocol import StudentCodeError
from mha_kit.runner.worker import WorkerStartError, WorkerSubmission


class Agreeable(torch.Tensor):
    pass


def test_only_plain_values_pass():
    x = torch.randn(2, 3)
    x.note = "an attribute"
    values = vetted((x, nn.Parameter(torch.ones(2)), None, 3, "s"), "f")
    assert [type(v) for v in values[:2]] == [torch.Tensor, torch.Tensor]
    assert not hasattr(values[0], "note") and not values[1].requires_grad
    for value, message in (
        (torch.zeros(2).as_subclass(Agreeable), msg("runner.subclass", name="f", type="Agreeable")),
        (torch.zeros(2).to_sparse(), msg("runner.bad_layout", name="f", layout="torch.sparse_coo",
                                         device="cpu")),
        (torch.empty(2, device="meta"), msg("runner.bad_layout", name="f", layout="torch.strided",
                                            device="meta")),
        ({"out": x}, msg("runner.bad_type", name="f", type="dict")),
        ([[[[1.0]]]], msg("runner.too_deep", name="f")),
    ):
        with pytest.raises(StudentCodeError) as raised:
            vetted(value, "f")
        assert raised.value.message == message, raised.value.message


def _through_pipe(payload: bytes):
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 2**20)  # room for the whole message: one thread
    try:
        write_all(write, payload)
        return receive(read, time.monotonic() + 5)
    finally:
        os.close(read)
        os.close(write)


def test_the_pipe_carries_values_and_views_as_they_were():
    base = torch.arange(12.0).view(3, 4)
    view = base[:, 1:3]  # a strided view into the same storage
    sent = {"value": (view, base, None), "dtype": torch.bfloat16, "size": torch.Size([2]),
            "meta": torch.empty(2, 3, device="meta"), "parameter": nn.Parameter(torch.ones(2)),
            "bits": b"\x00\x01", "numbers": [1, 2.5, 3j, True], "kinds": {"a", "b"},
            "conj": [torch.randn(1000, dtype=torch.cfloat).conj() for _ in range(10)]}
    got = _through_pipe(encode(sent))
    assert all(map(torch.equal, got["conj"], sent["conj"]))  # each from its own copy
    got_view, got_base, _ = got["value"]
    assert torch.equal(got_view, view) and got_view.stride() == view.stride() == (4, 1)
    assert got_view.untyped_storage().data_ptr() == got_base.untyped_storage().data_ptr()
    assert got["meta"].device.type == "meta" and got["meta"].shape == (2, 3)
    assert type(got["parameter"]) is nn.Parameter and got["parameter"].requires_grad
    assert {k: got[k] for k in ("dtype", "size", "bits", "numbers", "kinds")} == {
        k: sent[k] for k in ("dtype", "size", "bits", "numbers", "kinds")}


def _payload(value: object, storages: tuple[bytes, ...] = ()) -> bytes:
    """A message whose tuples ("tensor", ...) are sent as the tensors they claim to be, or whose
    pickle is `value` itself (bytes): what a worker that wrote its own pickle could send."""

    class Claims(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            return obj if isinstance(obj, tuple) and obj[:1] == ("tensor",) else None

    if isinstance(value, bytes):  # a pickle written by hand
        return frame(value, list(storages))
    buffer = io.BytesIO()
    Claims(buffer, protocol=5).dump(value)
    return frame(buffer.getvalue(), list(storages))


def test_the_pipe_carries_a_claim_that_fits_its_storage():
    assert _through_pipe(encode({"value": (torch.ones(2), None)}))["value"][1] is None
    assert torch.equal(_through_pipe(_payload(
        ("tensor", 0, "float32", (2,), (1,), 0, "cpu", False, False), (bytes(8),))),
        torch.zeros(2))


def test_views_of_one_storage_reach_a_gpu_as_views_of_one_copy(monkeypatch: pytest.MonkeyPatch):
    """Seen on an H100: each tensor was copied to the GPU on its own, so an input and its view
    arrived as two tensors and a correct `split_heads_view` was told it returned a copy. Here
    a clone stands in for the copy to the GPU."""
    from mha_kit.runner import framing

    copies = []
    monkeypatch.setattr(framing, "storage_to",
                        lambda storage, device: copies.append(device) or storage.clone())
    base = ("tensor", 0, "float32", (3, 4), (4, 1), 0, "cuda:0", False, False)
    view = ("tensor", 0, "float32", (2, 3), (1, 4), 1, "cuda:0", False, False)  # base.T[1:3]
    got_base, got_view = _through_pipe(_payload((base, view), (struct.pack("12f", *range(12)),)))
    assert copies == ["cuda:0"]
    assert got_view.untyped_storage().data_ptr() == got_base.untyped_storage().data_ptr()
    assert got_view.stride() == (1, 4) and torch.equal(got_view, got_base.t()[1:3])


@pytest.mark.parametrize("value", [torch.zeros(2).as_subclass(Agreeable), os.system, Agreeable,
                                   [0] * MAX_PICKLE])
def test_the_writer_sends_values_only(value):
    with pytest.raises(pickle.PicklingError):
        encode(value)


@pytest.mark.parametrize(("claim", "storages"), [
    (os.system, ()),  # code: the reader knows no such global
    (("tensor", 0, "float32", (100,), (1,), 0, "cpu", False, False), (bytes(8),)),
    (("tensor", None, "float32", (2**40,), (0,), 0, "meta", False, False), ()),
    (("tensor", 0, "float32", (2**40,), (0,), 0, "cpu", False, False), (bytes(4),)),
    (("tensor", 0, "float32", (-1, -2**40), (1, 1), 0, "cpu", False, False), (bytes(4),)),
    ([("tensor", 0, "float32", (2**25,), (0,), 0, "cpu", False, False)] * 3, (bytes(4),)),
    (b"\x80\x05cbuiltins\nbytearray\n\x8a\x05\x00\x00\x00\x00\x01\x85R.", ()),
    (("tensor", 0, "float32", (1000,), (1,), 0, "cpu", False, False), (b"",)),  # resizable
    (b"\x80\x05Nr" + struct.pack("<I", 2**24) + b".", ()),  # a memo of 2**24 slots
    (pickle.dumps([0] * MAX_PICKLE), ()),  # values that would take far more than their bytes
], ids=["code", "past_storage", "huge_meta", "huge_broadcast", "negative", "sum_too_large",
        "allocating_call", "empty_storage", "memo_index", "too_many_values"])
def test_the_reader_refuses_what_the_writer_never_sends(claim, storages):
    """...and builds no tensor that its storage cannot hold."""
    with pytest.raises(ValueError):
        _through_pipe(_payload(claim, storages))


def test_the_reader_refuses_junk_and_impossible_lengths():
    with pytest.raises(ValueError):
        _through_pipe(HEADER.pack(7) + b"garbage")
    with pytest.raises(EOFError):  # a length no reply may have: the pipe is out of step
        _through_pipe(HEADER.pack(MAX_MESSAGE + 1))


def test_the_byte_count_stops_at_the_room():
    huge = (2**64,) * 1000  # no product of 1000 huge numbers
    assert MAX_MESSAGE < _nbytes(huge, 4, MAX_MESSAGE) < 2**70


def test_a_timeout_costs_one_call_and_a_fresh_worker_takes_over():
    with WorkerSubmission(HOSTILE / "infinite_loop.py", limits=Limits(call_s=1)) as sub:
        sub.ensure_loaded()
        first = sub._proc.pid
        x = torch.randn(2, 3, 4, 5)
        with pytest.raises(StudentCodeError) as err:
            sub.call("split_heads", x, 2)
        assert err.value.message == msg("worker.timeout", what="split_heads", limit=1)
        assert err.value.kind == "timeout" and sub._proc is None
        merged = sub.call("merge_heads", x).value
        assert sub._proc.pid != first
        torch.testing.assert_close(merged, x.transpose(1, 2).reshape(2, 4, 15))


SLOW_SPLIT = """
import time


def split_heads(x, num_heads):
    time.sleep(0.3)  # right, but far too slow: each call is under the call limit
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)
"""


def test_a_slow_check_is_stopped_at_its_limit_and_the_next_check_starts_afresh(tmp_path):
    path = tmp_path / "slow.py"
    path.write_text(SLOW_SPLIT)
    with WorkerSubmission(path, limits=Limits(call_s=2, check_s=1)) as sub:
        slow = run_check("split_heads", sub)
        fine = run_check("merge_heads", sub)
    assert slow.score == 0
    assert slow.message == msg("worker.check_cap", what="split_heads", check="split_heads",
                               limit=1), slow.message
    assert fine.passed, fine.message


def test_the_overall_cap_stops_a_submission():
    """Each call times out and restarts the worker until the cap (restarts included) is hit."""
    with WorkerSubmission(HOSTILE / "loops_everywhere.py", limits=Limits(call_s=1, total_s=3)
                          ) as sub:
        messages = []
        # Twelve calls of at least 1 s each: past the 3 s cap however fast restarts are.
        for name in 2 * ("split_heads", "scaled_scores", "causal_mask", "attend", "merge_heads",
                         "output_projection"):
            try:
                sub.call(name, torch.zeros(1, 1, 1, 1), 1)
            except StudentCodeError as err:
                messages.append(err.message)
    assert messages[0] == msg("worker.timeout", what="split_heads", limit=1), messages[0]
    assert messages[-1].id in ("worker.total_cap", "worker.cap"), messages[-1]  # overall limit
    assert messages[-1].params["limit"] == 3


def test_a_notebook_cell_still_running_at_the_load_limit_costs_only_what_it_defines(tmp_path):
    """A training loop left in a notebook: the cell is left out of a second load, the cells
    before and after it are graded (all of them were lost: "an infinite loop at top level?")."""
    import nbformat

    cells = ["def split_heads(x, num_heads):\n    return 'before'\n",
             "while True:\n    time.sleep(0.1)\n",
             "def merge_heads(x):\n    return 'after'\n"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time")]
                                  + [nbformat.v4.new_code_cell(c) for c in cells])
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, str(path))
    with WorkerSubmission(path, limits=Limits(load_s=1.5)) as sub:
        assert sub.call("split_heads", torch.zeros(1), 1).value == "before"
        assert sub.call("merge_heads", torch.zeros(1)).value == "after"
        assert sub.problems == [  # still running at the limit: stopped and left out
            msg("worker.slow_cell", cell=msg("load.cell_starting", line="while True:"),
                limit=1.5)]


def test_a_load_that_fails_after_a_slow_cell_was_left_out_still_names_that_cell(tmp_path):
    """The second load (without the slow cell) dies at the cell after it: both are said."""
    import nbformat

    cells = ["import time", "while True:\n    time.sleep(0.1)\n", "import os\nos._exit(3)\n"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    path = tmp_path / "slow_then_dies.ipynb"
    nbformat.write(nb, str(path))
    with WorkerSubmission(path, limits=Limits(load_s=1.5)) as sub:
        sub.ensure_loaded()
        assert sub.problems == [
            msg("worker.slow_cell", cell=msg("load.cell_starting", line="while True:"),
                limit=1.5),
            msg("worker.load_crash", status=msg("worker.exit_code", code=3))]


def test_student_code_runs_in_a_temporary_folder_that_is_removed(tmp_path):
    source = tmp_path / "looks_around.py"
    source.write_text(
        "import os, torch\n"
        "open('left_behind.txt', 'w').write('x')\n"
        "def causal_mask(seq_len, device=None):\n"
        "    return torch.tensor([ord(c) for c in os.getcwd()])\n")
    with WorkerSubmission(source) as sub:
        codes = sub.call("causal_mask", 3).value
        workdir = "".join(map(chr, codes.tolist()))
        assert os.path.isfile(os.path.join(workdir, "left_behind.txt"))
    assert workdir != os.getcwd() and not os.path.exists(workdir)
    assert not (tmp_path / "left_behind.txt").exists()


def test_the_worker_runs_as_another_account_when_the_grader_is_root(tmp_path, monkeypatch):
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("only root can run student code as another account")
    source = tmp_path / "who.py"
    source.write_text("import os, torch\n"
                      "def causal_mask(seq_len, device=None):\n"
                      "    return torch.tensor(os.getuid())\n")
    if worker_user() == "nobody":  # Python and the kit are open to all: the real drop
        with WorkerSubmission(source) as sub:
            assert sub.call("causal_mask", 1).value.item() == 65534
        return
    # Here Python lives where `nobody` may not go: asking for the drop anyway is a clear
    # setup error, before any student code runs, not a grade of 0.
    monkeypatch.setenv(settings.variable("worker_user"), "nobody")
    with pytest.raises(WorkerStartError) as raised:
        with WorkerSubmission(source) as sub:
            sub.ensure_loaded()
    (said,) = raised.value.args  # could not start as user 'nobody'
    assert said.id == "worker.cannot_start" and said.params["user"] == msg(
        "worker.as_user", user="nobody", variable=settings.variable("worker_user"))


def test_a_fresh_home_gets_a_font_list_that_matplotlib_uses_as_it_is(tmp_path):
    """Seeded, matplotlib reads the grader's font list instead of building one (it would
    write a new file); an empty folder gets one built."""
    seeded, empty = tmp_path / "seeded", tmp_path / "empty"
    seeded.mkdir()
    empty.mkdir()
    fonts.seed(seeded)
    (copied,) = seeded.iterdir()
    os.utime(copied, (0, 0))
    for folder in (seeded, empty):
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=True,
                       env={**os.environ, "MPLCONFIGDIR": str(folder)})
    assert copied.stat().st_mtime == 0 and [p.name for p in empty.iterdir()] == [copied.name]


# --------------------------------------------------------------------------- the GPU memory cap

@pytest.mark.parametrize(("device", "index"), [("cuda", 1), ("cuda:0", 0), ("cuda:2", 2)])
def test_the_gpu_memory_cap_names_its_gpu_by_index(monkeypatch: pytest.MonkeyPatch,
                                                   device: str, index: int):
    """A worker's start on a GPU (seen on an H100): torch's memory cap refuses a bare "cuda",
    as these fakes do through torch's own index check, so every worker failed to start."""
    from torch.cuda._utils import _get_device_index

    from mha_kit.runner import serve

    capped = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda gpu: type(
        "Properties", (), {"total_memory": 80 * 2**30, "gpu": _get_device_index(gpu)}))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, gpu: capped.append((fraction, _get_device_index(gpu))))
    serve.limit_resources(device, 2.0, 1.0)
    assert capped == [(2 / 80, index)]
