#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine: Chromium (browser volunteers
# and tests, ships SwiftShader), Firefox ESR (the Firefox donor test), Mesa (llvmpipe for
# software WebGPU), libEGL for Dawn in Node, gdb (the stacks of a volunteer that hangs: its
# watchdog and the tests read them), then the npm packages. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in chromium firefox-esr gdb mesa-vulkan-drivers libegl-mesa0 libegl-dev libgles2 coturn libnss3-tools \
  iproute2 iptables procps iputils-ping ethtool python3 openssl; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${need[*]}"
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages (npm ci)"
  # onnxruntime-node (the export test) bundles its CPU runtime; its install script would fetch
  # CUDA libraries from the internet, which this machine does not need (or reach).
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
fi
echo "setup: done"
