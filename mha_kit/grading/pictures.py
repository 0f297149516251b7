"""Pictures of a failure, for people who would rather look than read (notebooks only).

`show(picture)` draws a failing check's `Picture`: for a mask, yours beside the expected
one; for any other tensor, heatmaps of expected, yours and the difference, one row per head.
Its words are in the messages' language; Chinese ones need a font that has Chinese
characters (`CJK_FONTS`), and where matplotlib knows none, as on a fresh Colab runtime, the
picture's words are English rather than rows of empty boxes.
"""

from __future__ import annotations

import contextlib
import functools
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..checks.core import Picture
from ..messages import Message, language, msg, render

# Fonts with Chinese characters, by matplotlib's name for them, the first one found is used:
# Noto and Source Han (most Linux desktops), WenQuanYi (Debian's fonts-wqy-*), then those
# that come with Windows and macOS.
CJK_FONTS = ("Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "WenQuanYi Zen Hei",
             "Noto Sans SC", "Microsoft YaHei", "SimHei", "PingFang SC", "Heiti SC",
             "Arial Unicode MS")


# Their files' names, for a font installed after matplotlib listed the system's fonts (its
# list is cached on disk and not rebuilt when a font is added).
CJK_FILES = ("notosanscjk", "sourcehansans", "wqy", "notosanssc", "msyh", "simhei", "pingfang",
             "stheiti", "arial unicode")


def cjk_font() -> str | None:
    """The first of `CJK_FONTS` that matplotlib knows, once any such font installed since
    matplotlib cached its list is added; or None."""
    from matplotlib import font_manager

    def known() -> str | None:
        names = {font.name for font in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in names), None)

    if known() is None:
        _add_installed_cjk_fonts()
    return known()


@functools.cache
def _add_installed_cjk_fonts() -> None:
    """Tell matplotlib of the system's font files named like a CJK font (once: a scan)."""
    from matplotlib import font_manager

    for path in font_manager.findSystemFonts():
        if any(hint in Path(path).name.lower() for hint in CJK_FILES):
            with contextlib.suppress(Exception):  # a file matplotlib cannot read
                font_manager.fontManager.addfont(path)


def chinese_fallback() -> bool:
    """Let matplotlib draw Chinese characters from now on with the first of `CJK_FONTS` it
    knows, after the fonts it draws with today (words in other scripts look as before): for
    the words a Chinese notebook's own picture cells draw. False where it knows none."""
    import matplotlib

    font = cjk_font()
    if font is None:
        return False
    families = list(matplotlib.rcParams["font.family"])
    if font not in families:
        matplotlib.rcParams["font.family"] = [*families, font]
    return True


@contextlib.contextmanager
def drawing_language() -> Iterator[str]:
    """The language to draw words in meanwhile, with a font that shows them: the messages'
    language, else English where matplotlib knows no font with Chinese characters. Figures
    made (and saved) inside get the font."""
    import matplotlib.pyplot as plt

    lang = language()
    font = cjk_font() if lang == "zh" else None
    with plt.rc_context({"font.family": font} if font else {}):
        yield "en" if lang == "zh" and font is None else lang


def draw(picture: Picture) -> Any:
    """The picture as a matplotlib figure, its words in the messages' language where a font
    can show them, else in English."""
    import matplotlib.pyplot as plt

    with drawing_language() as lang:
        if picture.cells:
            return _cells(plt, picture, lang)
        if picture.expected.dtype == torch.bool:
            return _masks(plt, picture, lang)
        return _heatmaps(plt, picture, lang)


def show(picture: Picture) -> None:
    """Draw the picture and show it (in a notebook: below the cell)."""
    import matplotlib.pyplot as plt

    draw(picture)
    plt.show()


def _title(picture: Picture, fig: Any, lang: str) -> str:
    """The picture's title in lines that fit the figure's width."""
    return textwrap.fill(render(picture.title, lang), max(40, int(fig.get_figwidth() * 13)),
                         break_long_words=False)


def _masks(plt: Any, picture: Picture, lang: str) -> Any:
    fig, axes = plt.subplots(1, 2, figsize=(6, 3.2))
    for ax, mask, name in zip(axes, (picture.got, picture.expected), ("yours", "expected")):
        mask = mask.detach().cpu()
        ax.imshow(mask.int().numpy(), cmap="Greys", vmin=0, vmax=1)
        ax.set_title(render(msg("picture.mask", name=msg(f"mask.{name}")), lang), fontsize=9)
        ax.set_xlabel(render(msg("picture.key"), lang))
        ax.set_ylabel(render(msg("picture.query"), lang))
        wrong = (picture.got.cpu() != picture.expected.cpu()).nonzero().tolist()
        if name == "yours" and wrong:
            i, j = zip(*wrong)
            ax.scatter(j, i, marker="x", color="red", label=render(msg("picture.wrong"), lang))
            ax.legend(loc="lower left", fontsize=7)
    fig.suptitle(_title(picture, fig, lang), fontsize=10)
    fig.tight_layout()
    return fig


def _heatmaps(plt: Any, picture: Picture, lang: str) -> Any:
    expected = picture.expected.detach().double().cpu()
    got = picture.got.detach().double().cpu()
    while expected.dim() > 3:  # keep (heads, rows, cols) of the first batch element
        expected, got = expected[0], got[0]
    if expected.dim() == 2:
        expected, got = expected[None], got[None]
    if expected.dim() == 1:
        expected, got = expected[None, None], got[None, None]
    heads = expected.shape[0]
    rows, cols = (_axis_label(dim) for dim in (picture.dims or ("Tq", "Tk"))[-2:])
    aspect = _aspect(*expected.shape[-2:])
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
                image = ax.imshow(data.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit,
                                  aspect=aspect)
            else:  # the same colour scale for both, so equal values look equal
                image = ax.imshow(data.numpy(), cmap="viridis", vmin=low, vmax=high,
                                  aspect=aspect)
            title = _panel_title(msg(name), picture.dims, h) if heads > 1 else msg(name)
            ax.set_title(render(title, lang), fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_ylabel(render(rows, lang), fontsize=8)
            ax.set_xlabel(render(cols, lang), fontsize=8)
            fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(_title(picture, fig, lang), fontsize=10)
    fig.tight_layout()
    return fig


# Past this ratio of rows to columns (or columns to rows), square cells would draw a strip a
# few pixels wide: a (512, 16) output of FlashAttention's memory check.
LONGEST_SQUARE_CELLS = 4


def _aspect(rows: int, cols: int) -> str:
    """Square cells ("equal") for a tensor of about as many rows as columns; cells stretched
    to fill the panel ("auto") for a long, thin one."""
    return "auto" if max(rows, cols) > LONGEST_SQUARE_CELLS * min(rows, cols) else "equal"


# What a heatmap's rows and columns run over, by the name of their dim.
_AXES = {"Tq": "picture.query", "Tk": "picture.key", "T": "picture.token", "D": "picture.feature",
         "E": "picture.feature", "H*D": "picture.feature", "out_features": "picture.feature",
         "out_dim": "picture.feature", "H": "picture.head_axis"}


def _axis_label(dim: str) -> Message | str:
    """"query i", "key j", "token t", "feature", "head" for a dim's name; else the name."""
    return msg(_AXES[dim]) if dim in _AXES else dim


def _panel_title(name: Message, dims: tuple[str, ...], index: int) -> Message:
    """"expected, head 1" for a head (or dims unknown: attention's tensors are (B, H, ...)),
    "expected, B=1" for another dim, such as the batch of a (B, T, E) output."""
    first = dims[-3] if len(dims) >= 3 else "H"
    return (msg("picture.head", name=name, head=index) if first == "H"
            else msg("picture.index", name=name, dim=first, index=index))


def _blocks(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A tensor as one grid: its first element while it has more than 3 dims, then the blocks
    of its first dim stacked: (P, R, C) -> (P·R, C), with the number of rows of a block."""
    grid = tensor.detach().double().cpu()
    while grid.dim() > 3:
        grid = grid[0]
    if grid.dim() == 3:
        return grid.reshape(-1, grid.shape[-1]), grid.shape[1]
    return grid.reshape(-1, grid.shape[-1]) if grid.dim() == 2 else grid.reshape(1, -1), 0


def _cell_text(value: float) -> tuple[str, int | None]:
    """"t2 h1 f0" and the head for a label 100t + 10h + f; the number itself otherwise."""
    if value == int(value) and 0 <= value < 1000:
        label = int(value)
        return f"t{label // 100}\nh{label // 10 % 10} f{label % 10}", label // 10 % 10
    return f"{value:.3g}", None


def _cells(plt: Any, picture: Picture, lang: str) -> Any:
    """Labelled numbers: the input, the expected result and yours, each cell named by the token,
    head and feature its number came from, coloured by head; yours in red where it differs."""
    panels = [(msg("picture.input"), picture.source), (msg("mask.expected"), picture.expected),
              (msg("mask.yours"), picture.got)]
    panels = [(name, t) for name, t in panels if t is not None]
    grids = [_blocks(t) for _, t in panels]
    same = picture.got.shape == picture.expected.shape
    wrong = (picture.got.double().cpu() != picture.expected.double().cpu()) if same else None
    wrong_grid = _blocks(wrong.double())[0] if wrong is not None else None
    width = sum(g.shape[1] for g, _ in grids) * 0.75 + 1.5
    height = max(g.shape[0] for g, _ in grids) * 0.42 + 1.2
    fig, axes = plt.subplots(1, len(panels), figsize=(width, height), squeeze=False,
                             gridspec_kw={"width_ratios": [g.shape[1] for g, _ in grids]})
    for ax, (name, tensor), (grid, rows) in zip(axes[0], panels, grids):
        colours = torch.full(grid.shape, 8.0)
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                text, head = _cell_text(float(grid[i, j]))
                colours[i, j] = 8.0 if head is None else head % 8
                red = (wrong_grid is not None and tensor is picture.got
                       and bool(wrong_grid[i, j]))
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="red" if red else "black", fontweight="bold" if red else None)
        ax.imshow(colours.numpy(), cmap="Pastel1", vmin=0, vmax=8, aspect="auto")
        for k in range(1, grid.shape[0] // rows if rows else 0):
            ax.axhline(k * rows - 0.5, color="black")
        ax.set_title(render(msg("picture.panel", name=name, shape=tuple(tensor.shape)), lang),
                     fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(_title(picture, fig, lang), fontsize=9)
    fig.supxlabel(render(msg("picture.blocks"), lang), fontsize=8)
    fig.tight_layout()
    return fig
