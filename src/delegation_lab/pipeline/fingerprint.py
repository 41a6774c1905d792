"""Fingerprints of every kind of floating-point operation the studies run, under the project's pins.

Two machines compute the same figures only if they compute the same bits for each operation a study
runs: a matmul, a batched matmul, an `exp`, a reduction, a training step. `fingerprints()` runs one
small case per kind of operation in a fresh process under `numerics.PINNED_ENV` (the libraries read
their variables when they load) and returns a SHA-1 prefix of each result's bytes. `RECORDED` holds
what this project's machine computed (`dlab numerics fingerprint --record` rewrites it);
`AMD_EPYC` what an AMD EPYC (AVX2, no AVX-512) computed for the cases it ran (the shared
`numerics_fingerprint.py`: its torch case is `torch.matmul_linear`, its numpy case `numpy.blas_simd`).
A case that differs from the record names the library whose kernels changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources

from delegation_lab.pipeline.numerics import PINNED_ENV, applies, cpu_model, describe, pinned_environ

# Each case prints one line "name digest". Every case seeds its own generator: the cases do not
# depend on each other's order. The torch cases mirror the ops grep finds in the studies
# (Linear, bmm / baddbmm / einsum, tanh / sigmoid / exp / log, log_softmax, Adam, BCE-with-logits).
TORCH_CASES = r'''
import hashlib, torch
torch.set_num_threads(1)
def out(name, *ts):
    print(name, hashlib.sha1(b"".join(t.detach().contiguous().numpy().tobytes() for t in ts)).hexdigest()[:12])
# the shared tool's case, byte for byte: its AMD EPYC value is known
torch.manual_seed(0)
a = torch.randn(257, 511); b = torch.randn(511, 263)
c = a @ b
x = torch.nn.functional.linear(a, torch.randn(129, 511))
out("torch.matmul_linear", c, x)
g = torch.Generator().manual_seed(1)
q = torch.randn(16, 33, 65, generator=g); k = torch.randn(16, 65, 47, generator=g); z = torch.randn(16, 33, 47, generator=g)
out("torch.bmm_baddbmm_einsum", torch.bmm(q, k), torch.baddbmm(z, q, k), torch.einsum("bij,bjk->bik", q, k))
v = torch.randn(100003, generator=g)
out("torch.elementwise", torch.exp(v), torch.log(v.abs() + 1e-3), torch.tanh(v), torch.sigmoid(v), torch.relu(v))
m = torch.randn(997, 131, generator=g)
out("torch.softmax_reductions", torch.log_softmax(m, -1), torch.softmax(m, 0), m.sum(), m.mean(0), m.std(1),
    torch.topk(m, 5, dim=1).values)
torch.manual_seed(2)
net = torch.nn.Sequential(torch.nn.Linear(24, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 6))
opt = torch.optim.Adam(net.parameters(), 1e-3)
xs, ys = torch.randn(8, 128, 24), torch.randint(0, 6, (8, 128))
for i in range(20):
    logits = net(xs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 6), ys.reshape(-1))
    loss = loss + torch.nn.BCEWithLogitsLoss()(logits[..., 0], (ys == 0).float())
    opt.zero_grad(); loss.backward(); opt.step()
out("torch.mlp_adam_training", *net.parameters())
'''
NUMPY_CASES = r'''
import hashlib, numpy as np
def out(name, *arrays):
    print(name, hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:12])
# the shared tool's case, byte for byte: its AMD EPYC value is known
r = np.random.default_rng(0)
a = r.standard_normal((257, 511)); b = r.standard_normal((511, 263))
c = a @ b; e = np.exp(r.standard_normal(100001)); t = np.tanh(r.standard_normal(100001)); s = np.sum(r.standard_normal(1000003))
print("numpy.blas_simd", hashlib.sha1(c.tobytes() + e.tobytes() + t.tobytes() + s.tobytes()).hexdigest()[:12])
r = np.random.default_rng(1)
m = r.standard_normal((301, 40)); w = r.standard_normal((40, 40))
out("numpy.einsum_linalg", np.einsum("ij,jk->ik", m, w), np.linalg.eigh(w @ w.T)[0], np.linalg.norm(m, axis=1))
v = r.standard_normal(200001)
out("numpy.reductions_quantiles", np.log(np.abs(v) + 1e-3), np.cumsum(v), np.mean(v), np.quantile(v, [0.025, 0.5, 0.975]),
    np.percentile(v, [5, 95]), np.sqrt(np.abs(v)))
from scipy import special, stats
from scipy.optimize import brentq
p = np.linspace(0.001, 0.999, 9999)
out("scipy.special_stats", special.expit(v[:9999]), special.logit(p), special.ndtri(p), stats.norm.cdf(v[:9999]),
    np.array([stats.wilcoxon(v[:400], v[400:800]).pvalue, brentq(lambda x: np.tanh(x) - 0.3, -2, 2, xtol=1e-14)]))
'''
TABLE_CASES = r'''
import hashlib, numpy as np, polars as pl, duckdb
def out(name, *arrays):
    print(name, hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:12])
r = np.random.default_rng(3)
df = pl.DataFrame({"g": r.integers(0, 50, 400000), "x": r.standard_normal(400000)})
agg = df.group_by("g").agg(pl.col("x").sum().alias("s"), pl.col("x").mean().alias("m"), pl.col("x").std().alias("d")).sort("g")
out("polars.group_by_float", agg["s"].to_numpy(), agg["m"].to_numpy(), agg["d"].to_numpy(), np.array([df["x"].sum()]))
con = duckdb.connect(config={'threads': 1})  # more threads sum doubles in another order (no stage aggregates in DuckDB)
con.register("t", df.to_arrow())
rows = np.array(con.execute("SELECT g, sum(x), avg(x), stddev_samp(x) FROM t GROUP BY g ORDER BY g").fetchall())
out("duckdb.group_by_float", rows)
'''
CASES = {"torch": TORCH_CASES, "numpy": NUMPY_CASES, "tables": TABLE_CASES}
RECORD_FILE = "numerics_fingerprints.json"
# What an AMD EPYC (AVX2, no AVX-512; torch 2.13.0+cpu, numpy 2.4.6) computed under these pins
# (MKL_CBWR=COMPATIBLE, ATEN avx2; OpenBLAS Haswell, no X86_V4): ../shared/tools/numerics_fingerprint.py.
AMD_EPYC = {"torch.matmul_linear": "b5a49abf141b", "numpy.blas_simd": "dc8135d1e3be"}


def fingerprints(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """case -> digest, each family of cases in a fresh process under the pins (plus `extra_env`,
    which a test uses to imitate another CPU's settings: the pins must win)."""
    env = dict(os.environ)
    env.update(extra_env or {})
    env = pinned_environ(env) if applies() else env
    env.pop("DLAB_NUMERICS_PINNED", None)
    result: dict[str, str] = {}
    for family, code in CASES.items():
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"fingerprint case family {family!r} failed: {done.stderr.strip().splitlines()[-1:]}")
        for line in done.stdout.splitlines():
            name, digest = line.split()
            result[name] = digest
    return result


def recorded() -> dict:
    """The record committed beside this module: {"fingerprints": {...}, "numerics": describe()}."""
    return json.loads(resources.files(__package__).joinpath(RECORD_FILE).read_text(encoding="utf-8"))


def record(path: str | os.PathLike[str] | None = None) -> dict:
    """Compute the fingerprints on this machine and write them (with what they were computed under)."""
    data = {"fingerprints": fingerprints(), "numerics": describe() | {"pins": dict(PINNED_ENV), "pinned": applies()}}
    target = path or str(resources.files(__package__).joinpath(RECORD_FILE))
    with open(target, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    return data


def report_lines(current: dict[str, str], record_: dict) -> list[str]:
    """One line per case: its digest, and whether it equals the record and the AMD EPYC's value."""
    want = record_.get("fingerprints", {})
    where = record_.get("numerics", {}).get("cpu", {})
    lines = [f"cpu: {cpu_model()['model']} ({cpu_model()['vendor']}); "
             f"record: {where.get('model', '?')} ({where.get('vendor', '?')})"]
    for name, digest in current.items():
        verdict = "same as record" if want.get(name) == digest else f"DIFFERS from record ({want.get(name, 'none')})"
        if name in AMD_EPYC:
            verdict += ", same as AMD EPYC" if AMD_EPYC[name] == digest else f", differs from AMD EPYC ({AMD_EPYC[name]})"
        lines.append(f"{name:28s} {digest}  {verdict}")
    return lines
