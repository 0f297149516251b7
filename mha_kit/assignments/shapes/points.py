"""The points table of the shapes warm-up: 100 points over five checks."""

from ...checks.spec import CheckSpec
from . import checks

CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("shapes_split_view", 20, ("split_heads_view",), checks.check_split_view),
    CheckSpec("shapes_merge", 20, ("merge_heads_transpose",), checks.check_merge),
    CheckSpec("shapes_rearrange", 20, ("split_heads_rearrange", "merge_heads_rearrange"),
              checks.check_rearrange),
    CheckSpec("shapes_view_quiz", 20, ("view_quiz",), checks.check_view_quiz),
    # Merges what the split gives: the kit's version of either where the student's fails its
    # own check (it waits while both fail).
    CheckSpec("shapes_roundtrip", 20, ("split_heads_view", "merge_heads_transpose"),
              checks.check_roundtrip, stand_ins=("split_heads_view", "merge_heads_transpose")),
)
