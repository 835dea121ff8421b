#!/usr/bin/python3
"""PyTorch reference for bench/ (issue 7): the rows of BenchmarkRows
computed with PyTorch on the same data.

The data come from the counter-based generator of bench/gen.go,
reimplemented here with numpy so that both sides see bit-identical float64
arrays (float32 rows round them). Each row uses PyTorch's idiomatic fastest
form: autograd.grad for gradients, double backward (create_graph=True) for
Hessian-vector and mixed products, a retained graph for products at a fixed
point, torch.no_grad for the CG vector updates, unrolled autograd for ITD.

Usage: torch_ref.py [--rows all|ROW,...] [--out DIR] [--budget S] [--threads N]
       torch_ref.py --serve [--budget S]      (driven by bench/cmd/benchrun)
       torch_ref.py --selftest                (first values of the generator)
Prints one JSON object on stdout; with --out also writes DIR/torch.json and,
for the cross-check, the float64 result vectors DIR/<spec>-<name>.bin (raw
little-endian float64). Rows are named as in BenchmarkRows:
large/f64/grad, small/f32/hvp-fixed, meta/f64/itd-bio, ...
"""

import argparse
import ctypes
import gc
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

SEED = 20261122  # bench.Seed
ALPHA = 0.5      # bench.Alpha
M64 = (1 << 64) - 1

# bench.Large, bench.Small, bench.MLP and bench.Wide: name, id, N, D, C, NVal, Hidden
SPECS = {
    "large": (1, 20000, 784, 10, 1000, 0),
    "small": (2, 1000, 100, 10, 100, 0),
    "mlp": (5, 10000, 784, 10, 1000, 256),
    "wide": (6, 5000, 512, 1000, 500, 0),
}
MLP_MU = 0.1  # bench.MLPMu


def mix64(z):
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def uniforms(s, n):
    """bench.Uniforms: n uniforms in [0, 1) of stream s, bit for bit."""
    key = mix64(SEED ^ ((s * 0xD1B54A32D192ED03) & M64))
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(key) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def symmetric(s, n, a):
    return (2 * uniforms(s, n) - 1) * a


def labels(s, n, c):
    return np.minimum(np.floor(uniforms(s, n) * c).astype(np.int64), c - 1)


def arrays(spec):
    """bench.Spec.Arrays: the data, the point (x, y) and the vector v."""
    sid, n, d, c, nval, h = SPECS[spec]
    b = 100 * sid
    sq3 = math.sqrt(3)
    a = dict(
        X=symmetric(b + 1, n * d, sq3).reshape(n, d), y=labels(b + 2, n, c),
        Xv=symmetric(b + 3, nval * d, sq3).reshape(nval, d), yv=labels(b + 4, nval, c), c=c, d=d, h=h)
    if h > 0:
        a.update(x=symmetric(b + 5, d * h, sq3 / math.sqrt(d)).reshape(d, h),
                 W=symmetric(b + 6, h * c, 0.01).reshape(h, c), v=symmetric(b + 7, h * c, 1.0).reshape(h, c))
    else:
        a.update(x=symmetric(b + 5, d, 1.0), W=symmetric(b + 6, d * c, 0.01).reshape(d, c),
                 v=symmetric(b + 7, d * c, 1.0).reshape(d, c))
    return a


# ---- memory -----------------------------------------------------------------

try:
    _libc = ctypes.CDLL("libc.so.6")
except OSError:
    _libc = None


def _status(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def peak_start():
    """As bench.PeakStart: collect, return free heap to the OS, reset VmHWM."""
    gc.collect()
    if _libc is not None:
        _libc.malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return -1
    return _status("VmRSS")


def peak_since(base):
    if base < 0:
        return -1
    hwm = _status("VmHWM")
    return max(hwm - base, 0) if hwm >= 0 else -1


# ---- the rows ---------------------------------------------------------------

class Problem:
    """A bench.Spec: logistic regression with outer x = λ (one penalty per
    feature), or with hidden > 0 the MLP with outer x = W1 and a tanh hidden
    layer; the inner variable W is the last layer in both."""

    def __init__(self, spec, dtype):
        a = arrays(spec)
        t = lambda x: torch.from_numpy(np.ascontiguousarray(x)).to(dtype)
        self.X, self.Xv = t(a["X"]), t(a["Xv"])
        self.y, self.yv = torch.from_numpy(a["y"]), torch.from_numpy(a["yv"])
        self.x0, self.W0, self.v = t(a["x"]), t(a["W"]), t(a["v"])
        self.mlp = a["h"] > 0
        self.scale = 1.0 / (a["c"] * a["d"])

    def features(self, X, x):
        """The last layer's input: tanh(X·W1) for the MLP, X itself else."""
        return torch.tanh(X @ x) if self.mlp else X

    def lower(self, x, W, Z=None):
        """g; Z, the features of X, when they are computed already.
        Logistic: CE(XW, Y) + (1/(c·d)) Σ_j e^{λ_j} Σ_k W_jk²; MLP:
        CE(tanh(XW1)W, Y) + ½μ‖W‖²."""
        if Z is None:
            Z = self.features(self.X, x)
        if self.mlp:
            return F.cross_entropy(Z @ W, self.y) + 0.5 * MLP_MU * (W * W).sum()
        return F.cross_entropy(Z @ W, self.y) + self.scale * (torch.exp(x) @ (W * W).sum(1))

    def upper(self, x, W, Z=None):
        """f; Z, the features of X', when they are computed already."""
        if Z is None:
            Z = self.features(self.Xv, x)
        return F.cross_entropy(Z @ W, self.yv)

    def leaves(self, x_grad):
        x = self.x0.clone().requires_grad_(x_grad)
        W = self.W0.clone().requires_grad_(True)
        return x, W

    def grad(self):
        x, W = self.leaves(False)
        return torch.autograd.grad(self.lower(x, W), W)[0]

    def hvp(self):
        x, W = self.leaves(False)
        gW, = torch.autograd.grad(self.lower(x, W), W, create_graph=True)
        return torch.autograd.grad(gW, W, self.v)[0]

    def mixed(self):
        x, W = self.leaves(True)
        gW, = torch.autograd.grad(self.lower(x, W), W, create_graph=True)
        return torch.autograd.grad(gW, x, self.v)[0]

    def hvp_fixed(self):
        """HVP at a fixed point: the double-backward graph is built once and
        each product only runs its backward (retain_graph)."""
        x, W = self.leaves(False)
        gW, = torch.autograd.grad(self.lower(x, W), W, create_graph=True)
        v = self.v
        return lambda: torch.autograd.grad(gW, W, v, retain_graph=True)[0]

    def aid(self, steps):
        """∇Φ ≈ ∇x f − ∇xW g · q with `steps` CG steps on ∇WW g · q = ∇W f
        from q = 0 (as implicit.CG with Tol < 0)."""
        x, W = self.leaves(True)
        if self.mlp:
            fx, b = torch.autograd.grad(self.upper(x, W), (x, W))
        else:  # f does not read λ: ∇λ f = 0
            fx, (b,) = 0, torch.autograd.grad(self.upper(x, W), W)
        gW, = torch.autograd.grad(self.lower(x, W), W, create_graph=True)
        with torch.no_grad():
            q = torch.zeros_like(b)
            r = b.clone()
            p = r.clone()
            rr = torch.dot(r.view(-1), r.view(-1))
        for _ in range(steps):
            Ap, = torch.autograd.grad(gW, W, p, retain_graph=True)
            with torch.no_grad():
                a = rr / torch.dot(p.view(-1), Ap.view(-1))
                q.add_(p, alpha=a.item())
                r.sub_(Ap, alpha=a.item())
                rr_new = torch.dot(r.view(-1), r.view(-1))
                p.mul_(rr_new / rr).add_(r)
                rr = rr_new
        mixed, = torch.autograd.grad(gW, x, q)
        return fx - mixed

    def itd(self, steps):
        """d f(x, W_T(x))/dx through `steps` unrolled gradient steps. The
        MLP's features are computed once and shared by every step, so the
        backward pass goes through the first layer once."""
        x, W = self.leaves(True)
        Z, Zv = self.features(self.X, x), self.features(self.Xv, x)
        Wt = W
        for _ in range(steps):
            gW, = torch.autograd.grad(self.lower(x, Wt, Z), Wt, create_graph=True)
            Wt = Wt - ALPHA * gW
        return torch.autograd.grad(self.upper(x, Wt, Zv), x)[0]


# ---- meta-learning (bench.MetaSpec, models.CNN, meta.Learner) -----------------

META = dict(tasks=4, ways=5, shots=5, queries=15, side=28, steps=10, cg=10, alpha=0.1, lam=0.1, eps=1e-5, lr=1e-3)


def meta_tasks(dtype):
    """bench.MetaTasks: (support images, support labels, query images, query labels) per task."""
    m = META
    d = m["side"] ** 2
    ts = []
    for k in range(m["tasks"]):
        xs = uniforms(300 + 10 * k + 1, m["ways"] * m["shots"] * d).reshape(-1, 1, m["side"], m["side"])
        xq = uniforms(300 + 10 * k + 2, m["ways"] * m["queries"] * d).reshape(-1, 1, m["side"], m["side"])
        ys = np.repeat(np.arange(m["ways"]), m["shots"])
        yq = np.repeat(np.arange(m["ways"]), m["queries"])
        ts.append((torch.from_numpy(xs).to(dtype), torch.from_numpy(ys),
                   torch.from_numpy(xq).to(dtype), torch.from_numpy(yq)))
    return ts


def meta_params(dtype):
    """bench.MetaParams: per block the filters (32 × in × 3 × 3), γ = 1, β = 0."""
    ps, cin = [], 1
    for k in range(4):
        fan = 9 * cin
        w = symmetric(400 + k, 32 * fan, math.sqrt(3) * math.sqrt(2 / fan)).reshape(32, cin, 3, 3)
        ps += [torch.from_numpy(w).to(dtype), torch.ones(32, dtype=dtype), torch.zeros(32, dtype=dtype)]
        cin = 32
    return [p.requires_grad_(True) for p in ps]


class Meta:
    """The meta-learning outer step of meta.Learner with PyTorch: the CNN
    backbone of models.CNN, a linear head (W, b) fit per task by `steps`
    gradient steps from 0 on CE + (λ/2)(‖W‖² + ‖b‖²), the meta-gradient
    averaged over the tasks, then an Adam step. Settings as bench.MetaSpec."""

    def __init__(self, method, dtype):
        self.method, self.dtype = method, dtype
        self.tasks = meta_tasks(dtype)
        self.params = meta_params(dtype)
        self.opt = torch.optim.Adam(self.params, lr=META["lr"])

    def features(self, x):
        ps = self.params
        for k in range(4):
            x = F.conv2d(x, ps[3 * k], padding=1)
            x = F.batch_norm(x, None, None, ps[3 * k + 1], ps[3 * k + 2], training=True, eps=META["eps"])
            x = F.max_pool2d(F.relu(x), 2)
        return x.flatten(1)

    @staticmethod
    def g(fs, ys, w, b):
        return F.cross_entropy(fs @ w + b, ys) + META["lam"] / 2 * ((w * w).sum() + (b * b).sum())

    @staticmethod
    def f(fq, yq, w, b):
        return F.cross_entropy(fq @ w + b, yq)

    def head0(self, nf):
        w = torch.zeros(nf, META["ways"], dtype=self.dtype, requires_grad=True)
        b = torch.zeros(1, META["ways"], dtype=self.dtype, requires_grad=True)
        return w, b

    def task_itd(self, xs, ys, xq, yq):
        fs, fq = self.features(xs), self.features(xq)
        w, b = self.head0(fs.shape[1])
        for _ in range(META["steps"]):
            gw, gb = torch.autograd.grad(self.g(fs, ys, w, b), (w, b), create_graph=True)
            w, b = w - META["alpha"] * gw, b - META["alpha"] * gb
        return self.f(fq, yq, w, b)

    def task_aid(self, xs, ys, xq, yq):
        fs, fq = self.features(xs), self.features(xq)
        w, b = self.head0(fs.shape[1])
        fsd = fs.detach()
        for _ in range(META["steps"]):  # the inner loop, not differentiated
            gw, gb = torch.autograd.grad(self.g(fsd, ys, w, b), (w, b))
            with torch.no_grad():
                w = (w - META["alpha"] * gw).requires_grad_(True)
                b = (b - META["alpha"] * gb).requires_grad_(True)
        gy = torch.autograd.grad(self.g(fs, ys, w, b), (w, b), create_graph=True)
        fval = self.f(fq, yq, w, b)
        rhs = torch.autograd.grad(fval, (w, b), retain_graph=True)
        flat = lambda ts: torch.cat([t.reshape(-1) for t in ts])
        with torch.no_grad():
            r = flat(rhs)
            stop = 1e-10 * r.norm()
            v = torch.zeros_like(r)
            p = r.clone()
            rr = r @ r
        nw = w.numel()
        for _ in range(META["cg"]):  # CG on ∇ww g · v = ∇w f, as implicit.CG with Tol 1e-10
            if rr.sqrt() <= stop:
                break
            hp = flat(torch.autograd.grad(gy, (w, b), (p[:nw].view_as(w), p[nw:].view_as(b)), retain_graph=True))
            with torch.no_grad():
                a = rr / (p @ hp)
                v += a * p
                r -= a * hp
                rr_new = r @ r
                p = r + (rr_new / rr) * p
                rr = rr_new
        v = v.detach()
        # ∇φ f − ∇φ⟨∇w g, v⟩
        return fval - (gy[0] * v[:nw].view_as(w)).sum() - (gy[1] * v[nw:].view_as(b)).sum()

    def meta_grad(self):
        for p in self.params:
            p.grad = None
        task = self.task_itd if self.method == "itd-bio" else self.task_aid
        n = len(self.tasks)
        for t in self.tasks:
            (task(*t) / n).backward()
        return torch.cat([p.grad.reshape(-1) for p in self.params])

    def step(self):
        self.meta_grad()
        self.opt.step()


_problems = {}


def problem(spec, dtype):
    if (spec, dtype) not in _problems:
        _problems[(spec, dtype)] = Problem(spec, dtype)
    return _problems[(spec, dtype)]


def all_rows():
    """Every PyTorch row, in table order."""
    out = []
    for spec in ("large", "small", "mlp", "wide"):
        for prec in ("f64", "f32"):
            out += ["%s/%s/%s" % (spec, prec, w) for w in ("grad", "hvp", "hvp-fixed", "mixed")]
        out += ["%s/f64/aid-cg%d" % (spec, k) for k in ([10, 100] if spec == "small" else [10])]
        out += ["%s/f64/itd-t%d" % (spec, t) for t in ((10, 100) if spec in ("large", "small") else (10,))]
    out += ["meta/%s/%s" % (prec, m) for prec in ("f64", "f32") for m in ("itd-bio", "aid-bio")]
    return out


def row_op(name):
    """The op of a row and whether it is heavy (one call, no warm-up)."""
    spec, prec, what = name.split("/")
    dtype = torch.float64 if prec == "f64" else torch.float32
    if spec == "meta":
        return Meta(what, dtype).step, False
    p = problem(spec, dtype)
    if what in ("grad", "hvp", "mixed"):
        return getattr(p, what), False
    if what == "hvp-fixed":
        return p.hvp_fixed(), False
    if what.startswith("aid-cg"):
        k = int(what[len("aid-cg"):])
        return (lambda: p.aid(k)), False
    if what.startswith("itd-t"):
        t = int(what[len("itd-t"):])
        return (lambda: p.itd(t)), spec == "large" and t == 100
    raise ValueError("unknown row " + name)


def write_check(spec, out):
    """Write the vectors of the cross-check to out/<spec>-<name>.bin, in
    float64 (the float32 rows' results widened)."""
    if spec == "meta":
        vs = {m: Meta(m, torch.float64).meta_grad() for m in ("itd-bio", "aid-bio")}
        vs.update({"f32-" + m: Meta(m, torch.float32).meta_grad() for m in ("itd-bio", "aid-bio")})
    else:
        p = problem(spec, torch.float64)
        vs = {"grad": p.grad(), "hvp": p.hvp(), "mixed": p.mixed(), "aid-cg10": p.aid(10), "itd-t10": p.itd(10)}
        p32 = problem(spec, torch.float32)
        vs.update({"f32-grad": p32.grad(), "f32-hvp": p32.hvp(), "f32-mixed": p32.mixed()})
    for name, v in vs.items():
        v.detach().numpy().astype("<f8").tofile(os.path.join(out, "%s-%s.bin" % (spec, name)))


def measure(op, heavy, budget):
    """Best over 3 batches of the mean time per call; a batch repeats the
    call for about `budget` seconds. Light rows are called once before;
    when that call takes over 2·budget, 2 batches, over 8·budget, 1. Heavy
    rows: one call, without warm-up. Also the peak RSS growth over the
    timed batches."""
    batches = 1
    if not heavy:
        t0 = time.perf_counter()
        op()
        warm = time.perf_counter() - t0
        batches = 3 if warm <= 2 * budget else 2 if warm <= 8 * budget else 1
    base = peak_start()
    best, total, reps = math.inf, 0, 0
    for _ in range(batches):
        n, t0 = 0, time.perf_counter()
        while True:
            op()
            n += 1
            el = time.perf_counter() - t0
            if (reps and n >= reps) or (not reps and el >= budget):
                break
        reps = n
        total += n
        best = min(best, el / n)
    return dict(s=best, reps=total, peak=peak_since(base))


def selftest():
    print(repr(uniforms(7, 3).tolist()))
    print(labels(8, 5, 10).tolist())


def info():
    return dict(torch=torch.__version__, numpy=np.__version__, threads=torch.get_num_threads(),
                omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", ""))


def serve(budget):
    """Line protocol for bench/cmd/benchrun: `row NAME` measures a row and
    answers its JSON; `check SPEC DIR` writes the cross-check vectors;
    `info` answers versions and threads. One JSON line per request."""
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        try:
            if f[0] == "row":
                op, heavy = row_op(f[1])
                r = measure(op, heavy, budget)
                r["name"] = f[1]
            elif f[0] == "check":
                write_check(f[1], f[2])
                r = dict(ok=True)
            elif f[0] == "info":
                r = info()
            else:
                r = dict(error="unknown request " + f[0])
        except Exception as e:  # report and go on
            r = dict(error="%s: %s" % (type(e).__name__, e))
        print(json.dumps(r), flush=True)
        gc.collect()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="", help="write torch.json and the cross-check vectors here")
    ap.add_argument("--rows", default="all", help="comma-separated rows, or all")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--serve", action="store_true", help="answer requests on stdin (see serve)")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        selftest()
        return
    torch.set_num_threads(args.threads)
    if args.serve:
        serve(args.budget)
        return
    res = info()
    res["rows"] = {}
    names = all_rows() if args.rows == "all" else args.rows.split(",")
    if args.out:
        for spec in sorted({n.split("/")[0] for n in names}):
            write_check(spec, args.out)
    for name in names:
        op, heavy = row_op(name)
        r = measure(op, heavy, args.budget)
        res["rows"][name] = r
        print("%-24s %12.3f ms  reps %4d  peak %8.1f MB" % (name, r["s"] * 1e3, r["reps"], r["peak"] / 2**20),
              file=sys.stderr, flush=True)
    out = json.dumps(res, indent=1)
    if args.out:
        with open(os.path.join(args.out, "torch.json"), "w") as f:
            f.write(out)
    print(out)


if __name__ == "__main__":
    main()
