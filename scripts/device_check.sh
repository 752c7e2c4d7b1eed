#!/usr/bin/env bash
# The checks that need a GPU, as one script for a lent GPU host (see the device notes in
# README's "Development" section). Run from the repository root; OUTDIR gets devcheck.tgz
# (every output, unedited) and pytest.log. Needs: python3 with torch (CUDA) and numpy,
# and the wheels of envlock's other dependencies in .whl/ (resolvelib, tomlkit; for the
# suite also jsonschema and its dependencies, uv, nvidia-cuda-runtime-cu12).
#
#   bash scripts/device_check.sh OUTDIR [PYTEST_SECONDS]
set -u
OUTD=${1:?OUTDIR}; PYTEST_S=${2:-230}
R=/tmp/devcheck; rm -rf "$R"; mkdir -p "$R"
py=python3
$py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/resolvelib-*.whl .whl/tomlkit-*.whl || exit 3
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
step() {  # step NAME SECONDS CMD...: stdout/stderr to $R/NAME.{out,err}, exit and time to summary
    local name=$1 secs=$2; shift 2
    local t0; t0=$(date +%s%N)
    timeout "$secs" "$@" >"$R/$name.out" 2>"$R/$name.err"
    local rc=$?
    echo "$name: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms: $*" | tee -a "$R/summary.txt"
}
pack() { tar -C /tmp -czf "$OUTD/devcheck.tgz" devcheck; }

step nvidia-smi 30 nvidia-smi
step nvidia-smi-q 30 nvidia-smi -q
step versions 60 $py -c "import sys, torch, numpy; print(sys.version); print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.nccl.version(), torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))"
step snapshot-deep 120 $py -m envlock snapshot --deep -o "$R/snap-deep.json"
step snapshot-files 60 $py -m envlock snapshot -o "$R/snap-files.json"
step snapshot-show 60 $py -m envlock snapshot --show "$R/snap-deep.json" -v
step doctor 60 $py -m envlock doctor
step doctor-json 60 $py -m envlock doctor --json
step doctor-smoke 180 $py -m envlock doctor --smoke --json
step resolve-host 120 $py -m envlock resolve --from-snapshot "$R/snap-deep.json" --offline -o "$R/host.lock"
step verify-runtime 60 $py -m envlock verify --stage runtime --lock "$R/host.lock"
step verify-runtime-json 60 $py -m envlock verify --stage runtime --lock "$R/host.lock" --json
pack
step guard-share 120 env NCCL_DEBUG=WARN torchrun --standalone --nproc-per-node 2 tests/training/nccl_guard.py share
step guard-share-nosampler 120 torchrun --standalone --nproc-per-node 2 tests/training/nccl_guard.py share-nosampler
step guard-bound 120 torchrun --standalone --nproc-per-node 1 tests/training/nccl_guard.py bound
step guard-gloo-share 120 torchrun --standalone --nproc-per-node 2 tests/training/gpu_binding.py share
step fleet 150 torchrun --standalone --nproc-per-node 2 -m envlock fleet --per-rank --deep --json --report "$R/fleet-report.json" --timeout 60
step fleet-lock 150 torchrun --standalone --nproc-per-node 2 -m envlock fleet --per-rank --lock "$R/host.lock" --timeout 60
pack
step crashes 300 $py scripts/device_crashes.py "$R/crash"
cp "$R/guard-share.err" "$R/crash/nccl-duplicate-gpu.log"
for f in "$R"/crash/*.log; do
    b=$(basename "$f" .log)
    step "doctor-log-$b" 60 $py -m envlock doctor --log "$f"
done
pack

# the suite, on this host's Python and packages (tools it lacks travel as wheels)
$py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site2 .whl/*.whl
PATH=/tmp/site2/bin:$PATH PYTHONPATH=$PWD:/tmp/site:/tmp/site2 timeout "$PYTEST_S" \
    $py -m pytest -v -p no:cacheprovider -n 14 --timeout 200 -rfEs tests >"$OUTD/pytest.log" 2>&1
echo "pytest: exit $?" | tee -a "$R/summary.txt"
pack
cat "$R/summary.txt"
