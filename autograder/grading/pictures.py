"""Pictures of a failure, for people who would rather look than read (notebooks only).

`show(picture)` draws a failing check's `Picture`: for a mask, yours beside the expected
one; for any other tensor, heatmaps of expected, yours and the difference, one row per head.
"""

from __future__ import annotations

from typing import Any

import torch

from ..checks.core import Picture
from ..messages import msg, render


def draw(picture: Picture) -> Any:
    """The picture as a matplotlib figure."""
    import matplotlib.pyplot as plt

    if picture.expected.dtype == torch.bool:
        return _masks(plt, picture)
    return _heatmaps(plt, picture)


def show(picture: Picture) -> None:
    """Draw the picture and show it (in a notebook: below the cell)."""
    import matplotlib.pyplot as plt

    draw(picture)
    plt.show()


def _masks(plt: Any, picture: Picture) -> Any:
    fig, axes = plt.subplots(1, 2, figsize=(6, 3.2))
    for ax, mask, name in zip(axes, (picture.got, picture.expected), ("yours", "expected")):
        mask = mask.detach().cpu()
        ax.imshow(mask.int().numpy(), cmap="Greys", vmin=0, vmax=1)
        ax.set_title(render(msg("picture.mask", name=msg(f"mask.{name}"))), fontsize=9)
        ax.set_xlabel(render(msg("picture.key")))
        ax.set_ylabel(render(msg("picture.query")))
        wrong = (picture.got.cpu() != picture.expected.cpu()).nonzero().tolist()
        if name == "yours" and wrong:
            i, j = zip(*wrong)
            ax.scatter(j, i, marker="x", color="red", label=render(msg("picture.wrong")))
            ax.legend(loc="lower left", fontsize=7)
    fig.suptitle(render(picture.title), fontsize=10)
    fig.tight_layout()
    return fig


def _heatmaps(plt: Any, picture: Picture) -> Any:
    expected = picture.expected.detach().double().cpu()
    got = picture.got.detach().double().cpu()
    while expected.dim() > 3:  # keep (heads, rows, cols) of the first batch element
        expected, got = expected[0], got[0]
    if expected.dim() == 2:
        expected, got = expected[None], got[None]
    if expected.dim() == 1:
        expected, got = expected[None, None], got[None, None]
    heads = expected.shape[0]
    fig, axes = plt.subplots(heads, 3, figsize=(9, 2.4 * heads + 0.6), squeeze=False)
    for h in range(heads):
        diff = got[h] - expected[h]
        limit = float(diff.nan_to_num(0).abs().max()) or 1.0
        both = torch.cat([expected[h].flatten(), got[h].flatten()])
        both = both[both.isfinite()]
        low, high = (float(both.min()), float(both.max())) if both.numel() else (0.0, 1.0)
        for ax, data, name in zip(axes[h], (expected[h], got[h], diff),
                                  ("mask.expected", "mask.yours", "picture.difference")):
            if name == "picture.difference":
                image = ax.imshow(data.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit)
            else:  # the same colour scale for both, so equal values look equal
                image = ax.imshow(data.numpy(), cmap="viridis", vmin=low, vmax=high)
            title = msg("picture.head", name=msg(name), head=h) if heads > 1 else msg(name)
            ax.set_title(render(title), fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(render(picture.title), fontsize=10)
    fig.tight_layout()
    return fig
