#!/usr/bin/env bash
# Issue 42's device script: our WebGPU kernels and training step on a real GPU, against TF.js's
# WebGPU backend on the same adapter and PyTorch fp32 (TF32 off) on the same GPU, from what
# scripts/device/gpu-pack.sh packed (.device/gpu: node, Dawn, the bench bundle, the Vulkan
# loader). The machine needs no Node, no registry and no Vulkan loader of its own.
#
#   bash scripts/device/gpu-pack.sh                      here, once (about 35 s; 32 MiB)
#   device run, carry [".device/gpu"]:  bash scripts/device/gpu.sh       (a real GPU, < 8 min)
#   bash scripts/device/gpu.sh --check                   here: the same path on llvmpipe
#
# Steps, each under its own time limit so one that hangs leaves the others' figures:
#   1. the adapter, its features and limits (bench.mjs adapter), nvidia-smi
#   2. PyTorch fp32: the kernels' shapes, its own 8192^3 GEMM, the training steps (torch_anchor.py)
#   3. our kernels against TF.js WebGPU (bench.mjs kernels --gpu)
#   4. our training step against TF.js WebGPU, with the volunteer's host round trip (bench.mjs step)
#   5. the report (bench/gpu/report.py): tables, and one JSON object as the LAST line
# Results and one log go to $OUT (or ./device-out): adapter.json, torch.json, kernels.json,
# step.json, report.json, nvidia-smi.txt, gpu.log (7 files: the device tool returns at most 8).
# --check runs the same unpacked folder here, alone (its own node first in PATH, its own Dawn,
# a clean environment): the adapter, then 7 cases of the kernels bench --quick on llvmpipe (Dawn's OpenGL
# ES backend; Mesa 22's lavapipe lacks what Dawn's Vulkan backend needs), the packed Vulkan
# loader proven loaded from the folder through SwiftShader, a small step with --no-peer, and
# the PyTorch anchor on the CPU where python3 has torch. Environment: GPU_MODELS (the step
# bench's --models), GPU_STEPS, and T_ADAPTER, T_TORCH, T_KERNELS, T_STEP (seconds).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
pack=$(realpath -m "${PACK_DIR:-$root/.device/gpu}")
check=0
[ "${1:-}" = --check ] && check=1
for f in node.xz dawn.tar.xz bench.mjs; do
  [ -f "$pack/$f" ] || { echo "gpu.sh: $pack/$f is missing: run bash scripts/device/gpu-pack.sh here first, and carry .device/gpu" >&2; exit 1; }
done
out=${OUT:-$root/device-out}
mkdir -p "$out"
log=$out/gpu.log
: > "$log"
say() { echo "$*" | tee -a "$log"; }
work=${GPU_WORK:-/tmp/vt-gpu}
rm -rf "$work" && mkdir -p "$work/bin" "$work/lib" || exit 1
xz -d -c "$pack/node.xz" > "$work/bin/node" && chmod +x "$work/bin/node" || exit 1
tar -C "$work" -xJf "$pack/dawn.tar.xz" || exit 1
cp "$pack/bench.mjs" "$root/bench/gpu/torch_anchor.py" "$root/bench/gpu/report.py" "$root/bench/torch_models.py" "$work/" || exit 1
for d in "$pack"/debs/*.deb; do dpkg -x "$d" "$work/lib" || exit 1; done
vk=$work/lib/usr/lib/x86_64-linux-gnu
libs=$vk
for l in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [ -d "$l" ] && libs=$libs:$l; done

# A clean environment: the folder's node first, the folder's Vulkan loader, nothing of this tree.
envs=(env -i "HOME=${HOME:-/root}" "PATH=$work/bin:/usr/local/bin:/usr/bin:/bin" "LD_LIBRARY_PATH=$libs" "TMPDIR=${TMPDIR:-/tmp}")
if [ $check = 1 ]; then
  envs+=("VT_GPU_BACKEND=opengles")
  models=${GPU_MODELS:-tiny-cnn@32:8}
  # The path, not the figures: a GEMM, fc6 (past one binding, which TF.js cannot run), and each convolution pass: the
  # 3x3's forward and input gradient, the 1x1's three (llvmpipe takes 2-6 s a case; the 3x3's filter gradient, 13).
  kargs=(--quick '--only=^(gemm 512|alexnet fc6|resnet 3x3 64->64 56x56 b1 (fwd|bwd-input)|resnet 1x1 )')
else
  icd=""
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$f" ] && { icd=$f; break; }
  done
  [ -n "$icd" ] && envs+=("VK_DRIVER_FILES=$icd" "VK_ICD_FILENAMES=$icd")
  envs+=("VT_GPU_BACKEND=vulkan")
  models=${GPU_MODELS:-small-cnn@32:64,resnet50@64:64,resnet50@224:32}
  kargs=(--gpu)
fi
run() { # run SECONDS NAME CMD...: in the folder, the clean environment, a time limit, logged
  local t=$1 name=$2; shift 2
  say "== $name (limit ${t}s): $*"
  local t0=$SECONDS
  (cd "$work" && timeout -k 5 "$t" "${envs[@]}" "$@") 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  say "== $name: exit $rc after $((SECONDS - t0)) s"
  return "$rc"
}

say "gpu.sh $(date -u +%FT%TZ) on $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); check=$check"
say "node $("${envs[@]}" node --version) from $("${envs[@]}" bash -c 'command -v node')"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$out/nvidia-smi.txt" 2>&1
  say "nvidia-smi: $(cat "$out/nvidia-smi.txt")"
fi
say "vulkan ICD: ${icd:-none named (check mode: Mesa/SwiftShader)}"

# 1. The adapter. On failure, what the ICD's library lacks is the likeliest cause: say it.
if ! run "${T_ADAPTER:-45}" adapter node bench.mjs adapter --out="$out/adapter.json"; then
  if [ -n "${icd:-}" ]; then
    lib=$(grep -o '"library_path"[^,]*' "$icd" | cut -d'"' -f4)
    say "ICD $icd loads $lib; libraries it cannot find:"
    (LD_LIBRARY_PATH=$libs ldd "$(LD_LIBRARY_PATH=$libs ldconfig -p | grep -m1 "$lib" | awk '{print $NF}')" 2>&1 | grep 'not found') | tee -a "$log"
  fi
fi
if [ $check = 1 ]; then
  # The Vulkan loader Dawn opens must be the packed one (SwiftShader is Chromium's Vulkan ICD).
  if [ -f /usr/lib/chromium/vk_swiftshader_icd.json ]; then
    loaded=$(cd "$work" && "${envs[@]}" VT_GPU_BACKEND=swiftshader LD_DEBUG=files timeout 60 node bench.mjs adapter 2>&1 > /dev/null |
      grep -m1 'calling init: .*libvulkan' | awk '{print $NF}')
    say "packed Vulkan loader: Dawn loaded ${loaded:-nothing}"
    case "$loaded" in "$vk"/*) ;; *) say "gpu.sh --check: Dawn did not load the packed Vulkan loader from $vk"; exit 1 ;; esac
  else
    say "packed Vulkan loader: not checked (no SwiftShader ICD here)"
  fi
fi

# The shapes and models, for both sides.
(cd "$work" && "${envs[@]}" node bench.mjs kernels "${kargs[@]}" --list > cases.json &&
  "${envs[@]}" node bench.mjs specs --models="$models" > specs.json) 2>&1 | tee -a "$log"

# 2. PyTorch (the CPU in check mode, where a python3 here has torch at all).
py=python3
for p in python3 /usr/bin/python3; do "$p" -c 'import torch' 2> /dev/null && { py=$(command -v "$p"); break; }; done
if [ $check = 0 ]; then
  run "${T_TORCH:-100}" torch env PYTHONUNBUFFERED=1 "$py" torch_anchor.py --cases cases.json --specs specs.json --out "$out/torch.json"
elif "$py" -c 'import torch' 2> /dev/null; then
  run "${T_TORCH:-300}" torch "$py" torch_anchor.py --device cpu --steps 2 --cases cases.json --specs specs.json --out "$out/torch.json"
else
  say "== torch: not run (python3 here has no torch)"
fi

# 3. and 4. Ours against TF.js on the same adapter.
# kernels.json is written after every case: one cut off by its limit keeps the cases it finished.
run "${T_KERNELS:-130}" kernels node bench.mjs kernels "${kargs[@]}"
[ -s "$work/bench/results/kernels.json" ] && cp "$work/bench/results/kernels.json" "$out/"
sargs=(--models="$models" --steps="${GPU_STEPS:-5}")
[ $check = 1 ] && sargs+=(--no-peer --steps=1)
run "${T_STEP:-170}" step node bench.mjs step "${sargs[@]}" && cp "$work/bench/results/step.json" "$out/"

# 5. The report: its last line is the one JSON object.
say "== report"
python3 "$work/report.py" "$out" 2>&1 | tee -a "$log"
[ -s "$out/kernels.json" ] && [ -s "$out/adapter.json" ]
