#!/usr/bin/env bash
# The CUDA checks of the fused sketch and the probe's speed, in one call of a GPU machine.
#
#   bash benchmarks/gpu_checks.sh OUTDIR            (repository root; a python3 with torch+CUDA and transformers)
#
# Runs, each under its own time limit, and writes each one's output to OUTDIR/<date>_<device>_<name>.txt
# with a header naming the date, the GPU, its driver and torch:
#   tests                 pytest tests/test_sketch_fused.py (fused sketch == pre-fused reference, on CUDA too)
#   sketch_speed_<model>  benchmarks/sketch_speed.py: fused vs blockwise vs pre-fused sketch
#   probe_overhead_<model> benchmarks/probe_overhead.py: probe / plain forward+backward, float32 and bfloat16
#                         (+ the numbers as <name>.json)
# for MODELS (default "smollm2-135m neox-1.4b", random-initialised weights of the real shapes: no model
# files needed). Targets (benchmarks, not tests): probe / plain <= 1.10 (SmolLM2-135M), <= 1.15 (1.4B).
# Copy the outputs to benchmarks/results/ and commit them.
#
# Environment: PYTHON (default python3), DEVICE (default cuda; cpu runs the same steps as a smoke test),
# MODELS, CHUNKS (probe chunks, default 13: 12 timed after a warm-up), REPEATS (sketch calls, default 7),
# STEP_TIMEOUT (seconds per step, default 240).
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu_checks.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
device=${DEVICE:-cuda}
models=${MODELS:-smollm2-135m neox-1.4b}
chunks=${CHUNKS:-13}
repeats=${REPEATS:-7}
limit=${STEP_TIMEOUT:-240}
export PYTHONPATH=lib${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

if [ "$device" = cuda ] && ! "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    echo "gpu_checks: no CUDA device visible to $py (torch.cuda.is_available() is False); nothing was measured" >&2
    exit 2
fi
hardware=$("$py" - <<'EOF'
import platform, torch
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"{p.name} ({p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs), CUDA {torch.version.cuda}, torch {torch.__version__}")
else:
    print(f"{platform.processor() or platform.machine()} CPU, torch {torch.__version__}")
EOF
)
stamp=$(date -u +%F)
failed=()

step() {   # step NAME COMMAND...: run under the time limit, tee to OUTDIR, remember a failure
    local name=$1 rc
    shift
    local file="$out/${stamp}_${device}_${name}.txt"
    echo "== $name: $*"
    { echo "# $(date -u +%FT%TZ), $hardware"; echo "# PYTHONPATH=lib $*"; } >"$file"
    timeout "$limit" "$@" 2>&1 | grep -v -e 'it/s\]$' -e '^Loading weights' | tee -a "$file"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { echo "# exit status $rc" >>"$file"; failed+=("$name (exit $rc)"); }
}

step tests "$py" -m pytest -q -p no:cacheprovider tests/test_sketch_fused.py
for m in $models; do
    step "sketch_speed_$m" "$py" benchmarks/sketch_speed.py --device "$device" --model "random:$m" --repeats "$repeats"
    step "probe_overhead_$m" "$py" benchmarks/probe_overhead.py --device "$device" --model "random:$m" \
        --chunks "$chunks" --json "$out/${stamp}_${device}_probe_overhead_$m.json"
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "gpu_checks: failed: ${failed[*]}" >&2
    exit 1
fi
echo "gpu_checks: all steps finished; outputs in $out"
