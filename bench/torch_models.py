# Shared by the PyTorch anchors (bench/torch_cpu.py on this machine's CPU, bench/gpu/torch_anchor.py
# on a lent GPU): our ModelSpec (the node list of src/nn/graph.ts, as JSON) built as PyTorch
# modules, and the timed training step both anchors run. Nothing here is ours to tune: plain
# PyTorch modules in NCHW fp32, SGD with momentum 0.9 (as the TF.js peers), cross-entropy,
# the loss read back every step (as our volunteer step reads it).
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SpecNet(nn.Module):
    """A ModelSpec's node list (src/nn/graph.ts) as PyTorch modules, walked in order."""

    def __init__(self, spec):
        super().__init__()
        self.nodes = spec["nodes"]
        self.layers = nn.ModuleDict()
        shapes = [list(spec["input"])]
        for i, n in enumerate(self.nodes):
            op = n["op"]
            if op == "input":
                continue
            x = shapes[n["a"] if op == "add" else n["in"]]
            if op == "conv":
                self.layers[str(i)] = nn.Conv2d(x[0], n["cout"], n["k"], n["stride"], n["pad"], bias=n["bias"])
                o = (x[1] + 2 * n["pad"] - n["k"]) // n["stride"] + 1
                shapes.append([n["cout"], o, o])
            elif op == "linear":
                self.layers[str(i)] = nn.Linear(x[0], n["out"], bias=n["bias"])
                shapes.append([n["out"]])
            elif op == "bn":
                self.layers[str(i)] = nn.BatchNorm2d(x[0]) if len(x) == 3 else nn.BatchNorm1d(x[0])
                shapes.append(x)
            elif op in ("maxpool", "avgpool"):
                cls = nn.MaxPool2d if op == "maxpool" else nn.AvgPool2d
                self.layers[str(i)] = cls(n["k"], n["stride"], n["pad"])
                o = (x[1] + 2 * n["pad"] - n["k"]) // n["stride"] + 1
                shapes.append([x[0], o, o])
            elif op == "lrn":
                q = n["params"]
                self.layers[str(i)] = nn.LocalResponseNorm(q["size"], q["alpha"], q["beta"], q["k"])
                shapes.append(x)
            elif op == "gap":
                shapes.append([x[0]])
            elif op == "flatten":
                size = 1
                for d in x:
                    size *= d
                shapes.append([size])
            elif op in ("relu", "dropout", "add"):
                shapes.append(x)
            else:
                raise ValueError(f"node {i}: op {op} is not known to torch_anchor.py")

    def forward(self, x):
        out = [x]
        for i, n in enumerate(self.nodes):
            op = n["op"]
            if op == "input":
                continue
            a = out[n["a"] if op == "add" else n["in"]]
            if op in ("conv", "linear", "bn", "maxpool", "avgpool", "lrn"):
                y = self.layers[str(i)](a)
            elif op == "relu":
                y = F.relu(a)
            elif op == "gap":
                y = a.mean(dim=(2, 3))
            elif op == "flatten":
                y = a.flatten(1)
            elif op == "dropout":
                y = F.dropout(a, n["p"], self.training)
            else:
                y = a + out[n["b"]]
            out.append(y)
        return out[-1]


class StepRunner:
    """The timed training step of `entry` (a spec with its side and batch), ready to run any number of times."""

    def __init__(self, entry, dev):
        spec, batch, side = entry["spec"], entry["batch"], entry["side"]
        self.dev = dev
        self.model = SpecNet(spec).to(dev).train()
        params = sum(p.numel() for p in self.model.parameters())
        if params != entry["params"]:
            raise ValueError(f"built {params} parameters from the spec, ours has {entry['params']}: the models differ")
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        g = torch.Generator(device=dev).manual_seed(1)
        self.x = torch.rand(batch, 3, side, side, device=dev, generator=g)
        self.y = torch.randint(0, spec["classes"], (batch,), device=dev, generator=g)

    def run(self, steps):
        """`steps` training steps: their times (ms) and losses."""
        times, losses = [], []
        for _ in range(steps):
            t0 = time.perf_counter()
            self.opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(self.x), self.y)
            loss.backward()
            self.opt.step()
            v = loss.item()
            times.append((time.perf_counter() - t0) * 1e3)
            losses.append(v)
        return times, losses

    def close(self):
        del self.model, self.opt
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()


def train_step_ms(entry, dev, steps, warmup=3):
    """Median ms per training step of `entry` (a spec with its side and batch) and the losses."""
    r = StepRunner(entry, dev)
    r.run(warmup)
    times, losses = r.run(steps)
    r.close()
    return statistics.median(times), losses
