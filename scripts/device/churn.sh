#!/usr/bin/env bash
# Runs `npm run bench -- churn` on a borrowed machine without Node, from what
# scripts/device/pack.sh packed (carry .device, src/wasm/build, .cache/bench/churn/data),
# several runs at once, each pinned to its own cores:
#   bash scripts/device/churn.sh "SEED:CPUS SEED:CPUS ..." [bench options...]
# e.g. "1:0-3 6:4-7 7:8-11" runs seeds 1, 6 and 7 on 4 cores each. Each run works in its own
# copy of the tree (the bench clears its job folder and writes bench/results/churn.json); its
# results and its log go to $OUT (or ./device-out) as churn-sSEED-cN.json and .log. Each run is
# stopped after CHURN_TIMEOUT_S seconds (default 570), so that the logs come back within the
# machine's per-command limit (10 minutes in 2026-11). On 16 cores one run of the default bench
# takes about 3 minutes (2026-11-28: 144-193 s), so three fit one command one after the other:
#   for s in 1 6 7; do CHURN_TIMEOUT_S=195 bash scripts/device/churn.sh "$s:0-15"; done
set -uo pipefail
cd "$(dirname "$0")/../.."
runs=${1:?usage: churn.sh "SEED:CPUS ..." [bench options]}
shift
out=${OUT:-$PWD/device-out}
mkdir -p "$out" /tmp/vt-node
[ -x /tmp/vt-node/node ] || { xz -d -c .device/node.xz > /tmp/vt-node/node && chmod +x /tmp/vt-node/node; } || exit 1
[ -d node_modules ] || tar -xJf .device/modules.tar.xz || exit 1
export PATH=/tmp/vt-node:$PATH
echo "node $(node --version) on $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
root=$PWD
pids=()
for r in $runs; do
  seed=${r%%:*} cpus=${r#*:}
  n=$(taskset -c "$cpus" nproc)
  dir=/tmp/vt-run-s$seed-c$n
  rm -rf "$dir" && mkdir -p "$dir"
  # The tree without its packs; node_modules shared.
  tar -C "$root" --exclude=./.device --exclude=./node_modules --exclude=./.git -cf - . | tar -C "$dir" -xf -
  ln -s "$root/node_modules" "$dir/node_modules"
  (
    cd "$dir" && timeout "${CHURN_TIMEOUT_S:-570}" taskset -c "$cpus" \
      node --import tsx --import ./scripts/raw-loader.mjs bench/run.ts churn --seed "$seed" "$@" \
      > "$out/churn-s$seed-c$n.log" 2>&1
    echo "run seed $seed on $n cores ($cpus): exit $?"
    cp bench/results/churn.json "$out/churn-s$seed-c$n.json" 2>/dev/null
    tail -1 "$out/churn-s$seed-c$n.log" | cut -c1-600
  ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
