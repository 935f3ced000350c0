#!/usr/bin/env python3
# The report of scripts/device/gpu.sh: reads what its steps wrote into one folder (adapter.json,
# kernels.json, step.json, torch.json, nvidia-smi.txt; any may be missing after a failure) and
# prints the tables issue 42 asks for, then one JSON object as the LAST line:
#   gemm_4096_gflops, gemm_4096_share_of_peak (of the datasheet fp32 peak below), gemm_4096_vs_tfjs,
#   gemm_4096_vs_torch, kernels_vs_torch (geometric mean over the shapes), step_vs_torch and
#   step_vs_tfjs per model, resnet50_64_vs_torch, resnet50_224_vs_torch, small_cnn_vs_torch,
#   host_share (largest share of a volunteer step spent on the host round trip), goals.
#   python3 bench/gpu/report.py DIR
import json
import math
import os
import sys

# Dense fp32 (non-tensor) peaks from the vendors' datasheets, TFLOP/s: leads, not readings.
FP32_PEAK_TFLOPS = {"H200": 66.9, "H100 80GB HBM3": 66.9, "H100 SXM": 66.9, "H100 PCIe": 51.2, "H100": 66.9, "A100": 19.5, "L40S": 91.6, "RTX 4090": 82.6}


def load(d, name):
    p = os.path.join(d, name)
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def rnd(x, d=3):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else round(x, d)


def peak_of(name):
    for k, v in FP32_PEAK_TFLOPS.items():
        if k in (name or ""):
            return v
    return None


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    adapter, kernels, step, torch = (load(d, f) for f in ("adapter.json", "kernels.json", "step.json", "torch.json"))
    smi = open(os.path.join(d, "nvidia-smi.txt")).read().strip() if os.path.exists(os.path.join(d, "nvidia-smi.txt")) else ""
    gpu_name = (torch or {}).get("device") or smi
    peak = peak_of(gpu_name)
    print(f"adapter: {(adapter or {}).get('description', 'none')}  backend {(adapter or {}).get('backend')}")
    if smi:
        print(f"nvidia-smi: {smi}")
    if torch:
        print(f"torch {torch['torch_version']} (CUDA {torch.get('cuda')}, cuDNN {torch.get('cudnn')}) on {torch['device']}: "
              f"fp32 GEMM {torch['gemm_peak_side']}^3 {torch['gemm_peak_gflops']:.0f} GFLOP/s; datasheet fp32 peak {peak} TFLOP/s")

    tk = {k["name"]: k for k in (torch or {}).get("kernels", []) if "gflops" in k}
    rows = (kernels or {}).get("results", [])
    print(f"\n{'kernel':46s} {'ours':>9s} {'tfjs':>9s} {'torch':>9s} {'/tfjs':>6s} {'/torch':>6s}   GFLOP/s")
    vs_torch = []
    for r in rows:
        t = tk.get(r["name"], {}).get("gflops")
        p = r.get("peerGflops")
        vs_torch.append(r["oursGflops"] / t if t else None)
        print(f"{r['name']:46s} {r['oursGflops']:9.1f} {p or float('nan'):9.1f} {t or float('nan'):9.1f} "
              f"{(r['oursGflops'] / p) if p else float('nan'):6.2f} {(r['oursGflops'] / t) if t else float('nan'):6.2f}")
    g4 = next((r for r in rows if r["name"] == "gemm 4096"), None)
    g4t = tk.get("gemm 4096", {}).get("gflops")

    ts = {s["model"]: s for s in (torch or {}).get("steps", []) if "ips" in s}
    srows = (step or {}).get("rows", [])
    print(f"\n{'training step':22s} {'ours':>9s} {'volunteer':>9s} {'tfjs':>9s} {'torch':>9s} {'/torch':>6s} {'host%':>6s}   images/s")
    step_vs_torch, step_vs_tfjs, host = {}, {}, []
    for r in srows:
        label = f"{r['model']}@{r['side']} b{r['batch']}"
        t = ts.get(label, {}).get("ips")
        if r.get("error"):
            print(f"{label:22s} FAILED: {r['error'][:120]}")
            continue
        step_vs_torch[label] = rnd(r["oursIps"] / t) if t else None
        step_vs_tfjs[label] = rnd(r["oursIps"] / r["peerIps"]) if r.get("peerIps") else None
        host.append(r["hostShare"])
        print(f"{label:22s} {r['oursIps']:9.1f} {r['volunteerIps']:9.1f} {r.get('peerIps') or float('nan'):9.1f} {t or float('nan'):9.1f} "
              f"{(r['oursIps'] / t) if t else float('nan'):6.2f} {100 * r['hostShare']:6.1f}")

    def model_ratio(prefix):
        v = [x for k, x in step_vs_torch.items() if k.startswith(prefix) and x]
        return v[0] if v else None

    share = g4["oursGflops"] / (peak * 1e3) if g4 and peak else None
    summary = {
        "report": "gpu",
        "device": gpu_name or None,
        "adapter": (adapter or {}).get("description"),
        "torch_version": (torch or {}).get("torch_version"),
        "gemm_4096_gflops": rnd(g4["oursGflops"], 1) if g4 else None,
        "gemm_4096_share_of_peak": rnd(share),
        "gemm_4096_vs_tfjs": rnd(g4["oursGflops"] / g4["peerGflops"]) if g4 and g4.get("peerGflops") else None,
        "gemm_4096_vs_torch": rnd(g4["oursGflops"] / g4t) if g4 and g4t else None,
        "torch_gemm_peak_gflops": rnd((torch or {}).get("gemm_peak_gflops"), 1),
        "kernels_vs_torch": rnd(geomean(vs_torch)),
        "kernels_vs_tfjs": (kernels or {}).get("summary", {}).get("ratio"),
        "step_vs_torch": step_vs_torch,
        "step_vs_tfjs": step_vs_tfjs,
        "small_cnn_vs_torch": model_ratio("small-cnn@"),
        "resnet50_64_vs_torch": model_ratio("resnet50@64 "),
        "resnet50_224_vs_torch": model_ratio("resnet50@224 "),
        "host_share": rnd(max(host)) if host else None,
    }
    summary["goals"] = {
        "gemm_share_ge_0.25": None if share is None else share >= 0.25,
        "gemm_vs_tfjs_ge_2": None if summary["gemm_4096_vs_tfjs"] is None else summary["gemm_4096_vs_tfjs"] >= 2,
        "resnet50_vs_torch_ge_0.3": None if summary["resnet50_64_vs_torch"] is None else min(
            x for x in (summary["resnet50_64_vs_torch"], summary["resnet50_224_vs_torch"]) if x is not None) >= 0.3,
        "host_share_le_0.1": None if summary["host_share"] is None else summary["host_share"] <= 0.1,
    }
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
