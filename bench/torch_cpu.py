#!/usr/bin/env python3
# PyTorch as the CPU peer of `npm run bench -- cpu`: the same models (built from our ModelSpec
# by bench/torch_models.py, parameter counts checked), shapes, batch and thread count as our wasm
# engine, in the same run. bench/cpu.ts starts one process per thread count with
# OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS set (they must be set before torch
# loads), and installs PyTorch from Debian's packages when it is missing.
#
#   python3 bench/torch_cpu.py --specs specs.json --threads N --steps S --out result.json
#
# Prints one JSON object as its last line. With --serve instead of --out, it times steps on request, so
# that bench/torch-pairs.ts can alternate them with ours: it prints {"ready": ...} once, then answers
# each line {"model": label, "steps": k} on standard input with one line {"ms": [...], "loss": [...]}
# (a model's first request runs --warmup untimed steps first), until standard input ends.
import argparse
import ctypes
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import StepRunner, train_step_ms  # noqa: E402


def mapped():
    """This process's memory map (/proc/self/maps): the libraries it loaded; None where it cannot be read."""
    try:
        return open("/proc/self/maps").read()
    except OSError:
        return None


def blas():
    """Which BLAS this process loaded (Debian's torch links the system's libblas.so.3)."""
    maps = mapped()
    if maps is None:
        return "unknown"
    for name in ("openblas", "mkl", "blis", "atlas"):
        if name in maps:
            return name
    return "reference" if "libblas.so" in maps else "none loaded"


def blas_core():
    """The kernels OpenBLAS chose for this CPU (openblas_get_corename), e.g. Haswell (its AVX2 kernels), which OPENBLAS_CORETYPE
    overrides; "no openblas" when another BLAS is loaded."""
    maps = mapped()
    if maps is None:
        return "unknown"
    paths = sorted({line.split()[-1] for line in maps.splitlines() if "openblas" in line and line.split()[-1].startswith("/")})
    for path in paths:
        try:
            name = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            continue
        name.restype = ctypes.c_char_p
        return name().decode(errors="replace")
    return "no openblas"


def conv_isa():
    """The kernel oneDNN runs PyTorch's convolutions with here (e.g. jit:avx512_core: 16 float lanes, where wasm SIMD has 4),
    read from oneDNN's verbose line for one ResNet-sized convolution; "no mkldnn" or "not seen" when it cannot be told."""
    if not torch.backends.mkldnn.is_available():
        return "no mkldnn"
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as f:
        # oneDNN prints with C's stdio to descriptor 1: point it at a file for the one call.
        os.dup2(f.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                torch.nn.functional.conv2d(torch.randn(8, 16, 32, 32), torch.randn(16, 16, 3, 3), padding=1)
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        f.seek(0)
        lines = f.read().decode(errors="replace").splitlines()
    for line in lines:
        p = line.split(",")
        if len(p) > 4 and p[1] == "exec" and p[3] == "convolution":
            return p[4]
    return "not seen"


def serve(a, dev):
    """Steps on request (see the top of this file); a request for a model not in the specs is answered with {"error": ...}."""
    entries = {e["label"]: e for e in json.load(open(a.specs))}
    runners = {}
    print(json.dumps({"ready": True, "torch_version": torch.__version__, "threads": torch.get_num_threads(), "blas": blas(),
                      "blas_core": blas_core()}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        label = req.get("model")
        if label not in entries:
            print(json.dumps({"error": f"no model {label!r} in the specs"}), flush=True)
            continue
        if label not in runners:
            runners[label] = StepRunner(entries[label], dev)
            runners[label].run(a.warmup)
        ms, losses = runners[label].run(int(req.get("steps", 1)))
        print(json.dumps({"ms": ms, "loss": losses}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--specs", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    if not a.serve and not a.out:
        ap.error("give --out FILE, or --serve")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device("cpu")
    if a.serve:
        serve(a, dev)
        return
    rows = []
    for e in json.load(open(a.specs)):
        ms, losses = train_step_ms(e, dev, a.steps, a.warmup)
        rows.append({"model": e["label"], "ms": ms, "ips": e["batch"] / (ms / 1e3), "loss": losses})
        print(f"torch {a.threads}t {e['label']:20s} {e['batch'] / (ms / 1e3):8.1f} img/s ({ms:.0f} ms/step)", file=sys.stderr, flush=True)
    result = {"torch_version": torch.__version__, "threads": torch.get_num_threads(), "blas": blas(),
              "blas_core": blas_core(), "mkldnn": torch.backends.mkldnn.is_available(), "conv_isa": conv_isa(), "rows": rows}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({"torch_version": result["torch_version"], "threads": result["threads"], "blas": result["blas"],
                      "blas_core": result["blas_core"], "conv_isa": result["conv_isa"]}))


if __name__ == "__main__":
    main()
