"""Numerics pin: CPU time of a study-like training loop (small batched MLP + Adam, numpy exp/matmul)
unpinned, under the project's pin (MKL's COMPATIBLE branch, the one Intel and AMD CPUs both run;
torch and numpy on AVX2), under the earlier Intel-only pin (MKL's AVX2 branch, which an AMD CPU
ignores) and under the baseline (no-AVX) alternative.

Each setting runs in its own process (the libraries read the variables at load); prints CPU-second
ratios to the unpinned run measured in one invocation, and whether the pinned result's bits are
the same when the environment imitates another CPU (AVX-512 paths, other thread counts).
"""

from __future__ import annotations

import os
import subprocess
import sys

from delegation_lab.pipeline.numerics import CLEARED_ENV, PINNED_ENV, pinned_environ

WORKLOAD = r"""
import hashlib, time, numpy as np, torch
torch.manual_seed(0); torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.Tanh(),
                          torch.nn.Linear(128, 16))
opt = torch.optim.Adam(net.parameters(), 1e-3)
x, y = torch.randn(40, 256, 64), torch.randint(0, 16, (40, 256))
a = np.random.default_rng(0).standard_normal((2000, 200))
t = time.process_time()
for _ in range(150):
    out = net(x)
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, 16), y.reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
for _ in range(100):
    s = np.exp(a).sum(1) + (a @ a[:200].T).sum(1)
h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters()) + s.tobytes())
print(time.process_time() - t, h.hexdigest()[:16])
"""
BASELINE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Prescott",
            "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"}
OTHER_CPU = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512", "OPENBLAS_CORETYPE": "SkylakeX",
             "NPY_ENABLE_CPU_FEATURES": "X86_V3", "OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"}


def _run(env: dict[str, str]) -> tuple[float, str]:
    out = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, check=True)
    seconds, digest = out.stdout.split()
    return float(seconds), digest


def main() -> None:
    plain = {k: v for k, v in os.environ.items() if k not in PINNED_ENV and k not in CLEARED_ENV}
    unpinned, _ = _run(plain)
    pinned, digest = _run(pinned_environ(plain))
    baseline, _ = _run(pinned_environ(plain) | BASELINE)
    intel_only, _ = _run(pinned_environ(plain) | {"MKL_CBWR": "AVX2"})
    _, other = _run(pinned_environ(plain | OTHER_CPU))
    print(f"CPU time vs unpinned: project pin (MKL COMPATIBLE) {pinned / unpinned:.2f}x, Intel-only pin (MKL AVX2) "
          f"{intel_only / unpinned:.2f}x, baseline (no-AVX) pin {baseline / unpinned:.2f}x; "
          f"project pin vs Intel-only pin {pinned / intel_only:.2f}x")
    print(f"pinned bits under another CPU's settings: {'identical' if other == digest else 'DIFFERENT'}")
