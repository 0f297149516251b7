"""The names the shapes warm-up defines (solutions/shapes)."""

from ...catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry("split_heads_view", "split_heads_view(x, num_heads)"),
    Entry("merge_heads_transpose", "merge_heads_transpose(x)"),
    Entry("split_heads_rearrange", "split_heads_rearrange(x, num_heads)"),
    Entry("merge_heads_rearrange", "merge_heads_rearrange(x)"),
    Entry("view_quiz", "view_quiz()"),
)
