"""Pictures of a failure, for people who would rather look than read (notebooks only)."""

from __future__ import annotations

from .checks import Picture


def show(picture: Picture) -> None:
    """Expected, yours and their difference side by side, one row per leading index."""
    import matplotlib.pyplot as plt

    expected = picture.expected.detach().double().cpu()
    got = picture.got.detach().double().cpu()
    while expected.dim() > 3:  # keep (rows, H, W): the first batch element
        expected, got = expected[0], got[0]
    if expected.dim() == 2:
        expected, got = expected[None], got[None]
    rows = expected.shape[0]
    fig, axes = plt.subplots(rows, 3, figsize=(9, 2.6 * rows), squeeze=False)
    for r in range(rows):
        for ax, data, name in zip(axes[r], (expected[r], got[r], got[r] - expected[r]),
                                  ("expected", "yours", "yours - expected")):
            ax.imshow(data.numpy(), cmap="RdBu_r" if name.startswith("yours -") else "viridis")
            ax.set_title(f"{name}" + (f" (row {r})" if rows > 1 else ""), fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(picture.title)
    fig.tight_layout()
    plt.show()
