#!/usr/bin/env bash
# Gradescope runs this once, as root, to build the grading image (docs/trusted-grading.md).
# The zip (`mha-kit gradescope`) holds run_autograder, this file and the kit's source in mha-kit/.
set -euo pipefail
apt-get update
apt-get install -y --no-install-recommends python3 python3-pip
# A pinned CPU build of torch: the kit is tested with it, and the image stays small.
python3 -m pip install --no-cache-dir "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
# With Triton, for triton_attention: its kernels are graded through Triton's interpreter.
python3 -m pip install --no-cache-dir "/autograder/source/mha-kit[triton]"
# Student code runs as `nobody`: the kit must be readable by every account, the course's
# secret (`mha-kit gradescope`) by root alone.
chmod -R a+rX /autograder/source
if [ -f /autograder/source/secret ]; then chmod 600 /autograder/source/secret; fi
