"""Module-level Python that correct submissions use (nanoGPT, gpt-fast and nanochat start with a
config dataclass): each feature is a block a student may put before their answers, ending in
an assertion that it worked. A file that runs them loses nothing where `python file.py` and
Jupyter run them; a grader that loads student code as less than a real module fails them at
load time, and with them every answer after.

`torch.compile` is not among them: its first call costs 10 s in every process that loads the
file. tests/test_timing.py grades a module that compiles part of itself through the worker.
"""

from __future__ import annotations

# The first block must stay first: a `from __future__` import starts a file or a cell.
FEATURES: dict[str, str] = {
    "its own future flags and a dataclass": '''from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class FeatureConfig:
    n_embd: int = 64
    n_head: int = 4
    names: list[str] = dataclasses.field(default_factory=list)


FEATURE_CONFIG = dataclasses.replace(FeatureConfig(), n_head=8)
assert dataclasses.asdict(FEATURE_CONFIG)["n_head"] == 8
''',
    "a frozen dataclass": '''@dataclasses.dataclass(frozen=True)
class FeatureShape:
    B: int
    T: int


assert hash(FeatureShape(1, 2)) == hash(FeatureShape(1, 2))
''',
    "typing.get_type_hints": '''import typing

assert typing.get_type_hints(FeatureConfig)["n_embd"] is int
''',
    "a NamedTuple": '''class FeaturePair(typing.NamedTuple):
    key: int
    value: int = 0


assert FeaturePair(1)._replace(value=2) == (1, 2)
''',
    "an enum": '''import enum


class FeatureMode(enum.Enum):
    TRAIN = enum.auto()
    EVAL = enum.auto()


assert FeatureMode["EVAL"] is FeatureMode.EVAL
''',
    "pickling its own classes": '''import pickle

import torch
from torch import nn


class FeatureLayer(nn.Module):
    def __init__(self, width: int = 4):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return self.linear(x)  # (..., width)


for _value in (FEATURE_CONFIG, FeaturePair(3, 4), FeatureMode.TRAIN, FeatureShape(2, 3)):
    assert pickle.loads(pickle.dumps(_value)) == _value
assert type(pickle.loads(pickle.dumps(FeatureLayer()))) is FeatureLayer
''',
    "torch.save and torch.load of its own module": '''import io

_buffer = io.BytesIO()
torch.save(FeatureLayer(), _buffer)
_buffer.seek(0)
assert type(torch.load(_buffer, weights_only=False)) is FeatureLayer
''',
    "copy.deepcopy": '''import copy

assert copy.deepcopy(FeatureLayer()).linear.weight.shape == (4, 4)
''',
    "the module in sys.modules": '''import sys

assert vars(sys.modules[__name__]) is globals()
assert sys.modules[FeatureLayer.__module__] is sys.modules[__name__]
''',
    "inspect.getsource": '''import inspect


def feature_square(x):
    return x * x  # (...)


assert "x * x" in inspect.getsource(feature_square)
''',
    "functools caches": '''import functools


@functools.lru_cache(maxsize=None)
def feature_inv_freq(dim: int, base: float = 10000.0) -> tuple[float, ...]:
    return tuple(base ** (-i / dim) for i in range(0, dim, 2))


class FeatureTable:
    @functools.cached_property
    def table(self) -> tuple[float, ...]:
        return feature_inv_freq(8)


assert FeatureTable().table == feature_inv_freq(8) and feature_inv_freq.cache_info().hits == 1
assert functools.partial(feature_inv_freq, base=100.0)(4)[1] == 0.1
''',
    "torch.jit.script": '''@torch.jit.script
def feature_scaled(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x * scale  # (...)


assert feature_scaled(torch.ones(2), 3.0).tolist() == [3.0, 3.0]
''',
    "abstract base classes": '''import abc


class FeatureBase(abc.ABC):
    registry: typing.ClassVar[list[str]] = []

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        FeatureBase.registry.append(cls.__name__)

    @abc.abstractmethod
    def size(self) -> int: ...


class FeatureSized(FeatureBase):
    def size(self) -> int:
        return 3


assert FeatureSized().size() == 3 and FeatureBase.registry == ["FeatureSized"]
''',
    "a runtime-checkable Protocol": '''@typing.runtime_checkable
class FeatureHasSize(typing.Protocol):
    def size(self) -> int: ...


assert isinstance(FeatureSized(), FeatureHasSize)
''',
    "logging and weak references": '''import logging
import weakref

logging.getLogger(__name__).addHandler(logging.NullHandler())
logging.getLogger(__name__).info("loaded")
_layer = FeatureLayer()
assert weakref.ref(_layer)() is _layer
''',
}


def prelude() -> str:
    """Every feature, in order, as one block of code."""
    return "\n".join(FEATURES.values())
