# The support model's training on a lent GPU (see training/gpu.py): run from the repository
# root with the packed folder carried; the log, the curve and the weights (in 15 MiB pieces)
# go to $OUT.
set -eo pipefail
export PYTHONUNBUFFERED=1
PACK=${PACK:-.gpu}
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
WORK=${WORK:-/tmp/sup}; rm -rf "$WORK"; mkdir -p "$WORK"
nvidia-smi -L 2>/dev/null || true
xz -dc "$PACK"/mix.jsonl.xz > "$WORK/mix.jsonl"
python3 -m training.cross_encoder --out "$WORK" --base "$PACK"/base --candidates "$PACK"/candidates.json \
  --batch 64 --lr 5e-5 --warmup 300 --steps "${STEPS:-11200}" --every "${EVERY:-1400}" \
  --threads 8 --minutes "${MINUTES:-5.5}" 2>&1 | tee "$OUT/train.log"
cp "$WORK/curve.jsonl" "$OUT/curve.jsonl"
python3 - "$WORK" "$OUT" <<'PY'
import sys, torch
from safetensors.torch import save_file
work, out = sys.argv[1], sys.argv[2]
saved = torch.load(f"{work}/checkpoint.pt", map_location="cpu")
state = {k: v.half().contiguous() for k, v in saved["model"].items()}
save_file(state, f"{work}/final.safetensors", metadata={"step": str(saved["step"])})
print("saved step", saved["step"], "tensors", len(state))
PY
split -b 15M "$WORK/final.safetensors" "$OUT/model.part-"
ls -la "$OUT"
