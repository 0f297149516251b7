#!/usr/bin/env bash
# The kit's one prepared run on a GPU machine, in one device call of about 9 minutes: the kit
# from source (PYTHONPATH) with the image's own torch and Triton, `TRITON_INTERPRET` unset so
# that kernels compile for the GPU. Here first:
#   bash ../shared/gpu/prepare.sh && cp scripts/gpu_run.sh .gpu/run.sh
#   PY=.venv/bin/python DEVICE=cpu SKIP_WHEELS=1 OUT=.gpu/out bash .gpu/run.sh   # a try, no GPU
# then one device call: carry [".gpu"], timeout_s 580, command "bash .gpu/run.sh". The report
# comes back as $OUT/gpu-report.txt, with the reference's JSON beside it (docs/speed.md).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-report.txt") 2>&1
S=$(mktemp -d)  # scratch: only the report and the reference's JSON come back
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
[ -n "${SKIP_WHEELS:-}" ] || "$PY" -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 MPLBACKEND=Agg
kit() { "$PY" -m mha_kit.cli "$@"; }
section() { printf '\n===== %s (%s s in) =====\n' "$*" "$SECONDS"; }
section machine
nvidia-smi -L 2>/dev/null; uname -r
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))'
kit check --help >/dev/null && echo "sandbox: $("$PY" -c 'from mha_kit.runner import sandbox; print(sandbox.layers())')"
ref=solutions/mha/multi_head_attention.ipynb
section "1. the reference notebook on $DEVICE"
kit check "$ref" --device "$DEVICE" --json "$OUT/ref.json"; echo "exit $?"
section "2. every other solution on $DEVICE (English editions): total, failing and timed lines"
for f in $(ls solutions/*/*.ipynb | grep -v '_zh/' | grep -v "^$ref$"); do
  s=$SECONDS; kit check "$f" --device "$DEVICE" > "$S/o.txt" 2>&1; rc=$?
  echo "$f: exit $rc, $((SECONDS - s)) s, $(grep -E '^ *total' "$S/o.txt" | tr -s ' ')"
  grep -E '✗|speed|mha-kit:' "$S/o.txt" | cut -c1-220
done
section "3. corpus files on $DEVICE: total, and the speed line"
for f in tests/corpus/template.py tests/corpus/alternatives/{einsum_where,buffer_mask,float32_scale}.py; do
  kit check "$f" --device "$DEVICE" > "$S/c.txt" 2>&1
  echo "$f: $(grep -E '^ *total' "$S/c.txt" | tr -s ' ') | $(grep speed_fused "$S/c.txt" | cut -c1-160)"
done
section "4. the Triton speed check's calibration on $DEVICE (3 runs a style)"
timeout 200 "$PY" scripts/triton_speed_calibration.py 3 --device "$DEVICE"; echo "exit $?"
section "5. the mha speed check's calibration on $DEVICE (3 runs a style)"
timeout 120 "$PY" -m mha_kit.cli bench --calibrate 3 --device "$DEVICE"
section "6. bench on $DEVICE"
timeout 40 "$PY" -m mha_kit.cli bench --device "$DEVICE"
section done
