#!/usr/bin/env bash
# The whole suite: type check, then every vitest file (Node WebGPU, in-memory and
# loopback WebRTC, headless Chromium). A test that finds no WebGPU adapter fails.
set -euo pipefail
cd "$(dirname "$0")/.."
npx tsc --noEmit
npx vitest run "$@"
