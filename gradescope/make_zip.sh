#!/usr/bin/env bash
# Build the zip to upload to Gradescope: run_autograder and setup.sh at its root, the kit's
# source in mha-kit/. Usage: gradescope/make_zip.sh [OUT.zip]   (default: ./autograder.zip)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="$(realpath -m "${1:-autograder.zip}")"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$here/run_autograder" "$here/setup.sh" "$stage/"
mkdir "$stage/mha-kit"
cp -r "$root/pyproject.toml" "$root/README.md" "$root/autograder" "$stage/mha-kit/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
rm -f "$out"
(cd "$stage" && "${PYTHON:-python3}" -m zipfile -c "$out" run_autograder setup.sh mha-kit)
echo "wrote $out"
