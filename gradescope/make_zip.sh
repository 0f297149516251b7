#!/usr/bin/env bash
# Build the zip to upload to Gradescope: run_autograder, setup.sh and `assignment` (the name of
# the assignment it grades, or of an edition: mha_zh) at its root, the kit's source in mha-kit/.
# Usage: gradescope/make_zip.sh [OUT.zip [ASSIGNMENT [HIDDEN]]]
#   defaults: ./autograder.zip, mha, after_published. HIDDEN is the visibility of the tests on
#   the hidden inputs (hidden, after_due_date, after_published, visible), or none for no such
#   tests.
# With MHA_KIT_SECRET set, the zip also holds it in `secret`: the course's secret, which salts
# every input the checks draw (docs/trusted-grading.md). Students never see the zip.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="$(realpath -m "${1:-autograder.zip}")"
assignment="${2:-mha}"
hidden="${3:-after_published}"
case "$hidden" in
    hidden|after_due_date|after_published|visible|none) ;;
    *) echo "make_zip.sh: no visibility $hidden (hidden, after_due_date, after_published, visible, none)" >&2
       exit 2 ;;
esac
if [ ! -d "$root/solutions/$assignment" ]; then
    echo "make_zip.sh: no assignment $assignment (solutions/$assignment/ is missing)" >&2
    exit 2
fi
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$here/run_autograder" "$here/setup.sh" "$stage/"
echo "$assignment" > "$stage/assignment"
echo "$hidden" > "$stage/hidden_visibility"
secret=()
if [ -n "${MHA_KIT_SECRET:-}" ]; then
    (umask 077 && printf '%s\n' "$MHA_KIT_SECRET" > "$stage/secret")
    secret=(secret)
fi
mkdir "$stage/mha-kit"
cp -r "$root/pyproject.toml" "$root/README.md" "$root/mha_kit" "$stage/mha-kit/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
rm -f "$out"
(cd "$stage" && "${PYTHON:-python3}" -m zipfile -c "$out" run_autograder setup.sh assignment \
    hidden_visibility "${secret[@]}" mha-kit)
echo "wrote $out"
