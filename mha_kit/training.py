"""Does it train? The student's fused module and `nn.MultiheadAttention`, trained side by side.

Both start from the same weights and see the same batches of a tiny task that attention must
solve: each token's target is the previous token's content, so a query has to find the key
one position back (the inputs carry a fixed positional code). A module that attends the way
`nn.MultiheadAttention` does follows its loss curve; one whose gradients are cut (a
`.detach()`, `.data`, `torch.no_grad()`) stays flat. DisplayText in the notebook, not graded.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import oracle
from .messages import Message, msg, render

EMBED_DIM, NUM_HEADS, TOKENS, BATCH = 16, 4, 8, 32


def _weights(module: nn.Module) -> dict[str, torch.Tensor | None]:
    """The module's projections in the fused naming, float32 copies."""
    names = ("q_proj", "k_proj", "v_proj", "out_proj")
    params: dict[str, torch.Tensor | None] = {}
    for name in names:
        layer = module.get_submodule(name)
        params[f"{name}.weight"] = layer.weight.detach().clone().float()
        params[f"{name}.bias"] = None if layer.bias is None else layer.bias.detach().clone().float()
    return params


def _batch(gen: torch.Generator, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randn(BATCH, TOKENS, EMBED_DIM, generator=gen)  # (B, T, E)
    target = tokens.roll(1, dims=1)  # (B, T, E): token t's target is token t - 1
    return tokens + positions, target


def train_side_by_side(module_cls: type, *, steps: int = 60, lr: float = 1e-2, seed: int = 0
                       ) -> dict[str, list[float]]:
    """Loss per step of `module_cls(EMBED_DIM, NUM_HEADS)` and of nn.MultiheadAttention, from
    the same initial weights, on the same batches (causal mask; position 0 has no target)."""
    torch.manual_seed(seed)
    student = module_cls(EMBED_DIM, NUM_HEADS)
    reference = oracle.torch_mha(_weights(student), EMBED_DIM, NUM_HEADS).train()
    gen = torch.Generator().manual_seed(seed)
    positions = torch.randn(TOKENS, EMBED_DIM, generator=gen) * 2  # (T, E)
    causal = oracle.causal_mask(TOKENS)  # (T, T), True = blocked
    runs: dict[str, Any] = {
        "your MultiHeadAttention": lambda x: student(x, attn_mask=causal, need_weights=False)[0],
        "nn.MultiheadAttention": lambda x: reference(x, x, x, attn_mask=causal,
                                                     need_weights=False)[0],
    }
    optimizers = {"your MultiHeadAttention": torch.optim.Adam(student.parameters(), lr=lr),
                  "nn.MultiheadAttention": torch.optim.Adam(reference.parameters(), lr=lr)}
    losses: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(steps):
        x, target = _batch(gen, positions)
        for name, forward in runs.items():
            loss = F.mse_loss(forward(x)[:, 1:], target[:, 1:])
            optimizers[name].zero_grad()
            if loss.requires_grad:  # a module cut from the graph cannot learn: its loss stays
                loss.backward()
                optimizers[name].step()
            losses[name].append(loss.item())
    return losses


def shown(name: str) -> Message | str:
    """A run's name in the language of messages ("your X" is the student's module)."""
    return msg("training.yours", name=name.removeprefix("your ")) if name.startswith(
        "your ") else name


def plot_losses(losses: dict[str, list[float]]) -> Any:
    """Both loss curves on one figure; returns it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    for (name, curve), style in zip(losses.items(), ("-", "--")):
        ax.plot(curve, style, label=render(shown(name)))
    ax.set_xlabel(render(msg("training.step")))
    ax.set_ylabel(render(msg("training.loss")))
    ax.set_title(render(msg("training.title")), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
