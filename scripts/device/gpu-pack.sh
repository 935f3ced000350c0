#!/usr/bin/env bash
# Packs what scripts/device/gpu.sh needs on a borrowed GPU machine that has no Node, no
# package registry and no Vulkan loader (the device tool's H100/H200 machines: at most 64 MiB
# of files travel with a command). Writes .device/gpu/ (ignored by git):
#   node.xz        this machine's node binary (its only libraries are glibc's and libstdc++)
#   dawn.tar.xz    the 'webgpu' package (Dawn for Node): index.js, package.json, linux-x64 dawn.node
#   bench.mjs      bench/gpu/entry.ts bundled by esbuild: the kernels and step benches, TF.js's
#                  WebGPU backend and our shaders (scripts/device/bundle.mjs)
#   debs/          Debian's Vulkan loader and the GL dispatch libraries NVIDIA's ICD loads
#                  (apt-get download; gpu.sh unpacks them with dpkg -x into a folder of its own)
# Then carry .device/gpu with the command:  bash scripts/device/gpu.sh
# XZ_LEVEL (default 6) trades time for size; the check in the suite packs with 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d node_modules/webgpu ] || { echo "gpu-pack: run npm run setup first" >&2; exit 1; }
out=${PACK_DIR:-.device/gpu}
mkdir -p "$out/debs"
level=${XZ_LEVEL:-6}
node=$(readlink -f "$(command -v node)")
if ldd "$node" | grep -q '=> not found\|libnode'; then
  echo "gpu-pack: $node links libraries beside glibc's and libstdc++ (ldd $node); use a node binary from nodejs.org" >&2
  exit 1
fi
if [ ! -f "$out/node.xz" ] || [ "$node" -nt "$out/node.xz" ]; then
  xz -T0 "-$level" -c "$node" > "$out/node.xz.part" && mv "$out/node.xz.part" "$out/node.xz"
fi
dawn=node_modules/webgpu/dist/linux-x64/dawn.node
if [ ! -f "$out/dawn.tar.xz" ] || [ "$dawn" -nt "$out/dawn.tar.xz" ]; then
  tar -cf - node_modules/webgpu/index.js node_modules/webgpu/package.json "$dawn" | xz -T0 "-$level" > "$out/dawn.tar.xz.part"
  mv "$out/dawn.tar.xz.part" "$out/dawn.tar.xz"
fi
node scripts/device/bundle.mjs "$out/bench.mjs"
# The Vulkan loader, and what NVIDIA's ICD (libGLX_nvidia) loads beside it, as the device
# tool's README lists them; X11's client libraries for libGLX. Names without epochs' '%3a'.
debs=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 libx11-6 libxext6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0)
missing=()
for d in "${debs[@]}"; do compgen -G "$out/debs/${d}_*.deb" > /dev/null || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
  ( cd "$out/debs" && { apt-get download "${missing[@]}" 2>/dev/null || { apt-get update -qq && apt-get download "${missing[@]}"; }; } ) || {
    echo "gpu-pack: could not download ${missing[*]} with apt-get (run apt-get update; the machine needs Debian's package mirror)" >&2
    exit 1
  }
  for f in "$out"/debs/*%3a*; do if [ -e "$f" ]; then mv "$f" "${f//%3a/_}"; fi; done
fi
du -sh "$out"/* | sed 's/^/gpu-pack: /'
echo "gpu-pack: $(du -sm "$out" | cut -f1) MiB in $out; run there: bash scripts/device/gpu.sh (carry $out)"
