"""Formulation-1 energies of the ``da`` sampler vs neal and openjij-sa at equal wall time.

Instances: 30x30 exact-rank matrices (S1 Algorithm 3) at r = 1..5 and a 30x38 Bernoulli(0.5)
matrix at r = 5 (6,040 variables), Formulation 1 with lam = 1 (the paper's setting). Every
sampler gets the same ``time_limit`` and ``num_reads``; neal and openjij-sa repeat rounds of
reads until the time is spent (the registry's adapters), ``da`` follows the clock. All run in
one process after a warm-up, one after another.

With a CUDA GPU and CuPy, ``--gpu-reads`` adds ``da`` with ``device="gpu"`` (the fused
kernel, all reads at once) at those read counts as further peers, and a throughput table
compares flip trials per second at a fixed number of sweeps: the numba kernel, the GPU's
whole-array operations and the fused kernel.

    .venv/bin/python bench/bench_da.py --time-limits 1 5
    python bench/bench_da.py --time-limits 0.5 2 --gpu-reads 4 1024 --name da_gpu

Writes ``bench/results/<name>.json`` and ``bench/results/<name>.md`` (name ``da``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import scipy.sparse

from bmfdsl.apps import make_bernoulli, make_exact_rank
from bmfdsl.backends.da import DASampler
from bmfdsl.backends.neal import NealBackend
from bmfdsl.errors import BackendUnavailableError
from bmfdsl.modeling import compile_model
from bmfdsl.solvers.da import ArrayRuns, default_temperatures, get_array_module, prepare_bqm
from bmfdsl.solvers.da._array import dense_couplings


def gpu_module() -> ModuleType | None:
    try:
        return get_array_module("gpu")
    except BackendUnavailableError as exc:
        print(f"no GPU rows: {exc}", flush=True)
        return None


def samplers(gpu_reads: list[int], gpu: ModuleType | None) -> dict[str, tuple[object, dict]]:
    """label -> (sampler, keyword arguments that override the common ones)."""
    found: dict[str, tuple[object, dict]] = {"da": (DASampler(), {}), "neal": (NealBackend(), {})}
    try:
        from bmfdsl.backends.openjij import OpenJijSABackend

        found["openjij-sa"] = (OpenJijSABackend(), {})
    except ImportError:  # the openjij extra is optional
        pass
    if gpu is not None:
        for reads in gpu_reads:
            found[f"da-gpu x{reads}"] = (DASampler(), {"device": "gpu", "num_reads": reads})
    return found


def throughput(bqm, sweeps: int, reads_list: list[int], gpu: ModuleType | None) -> list[dict]:
    """Wall time of ``sweeps`` iterations per run: numba (4 reads, one after another), and on
    the GPU the array operations and the fused kernel at each read count."""
    h, indptr, indices, data, _ = prepare_bqm(bqm)
    hot, cold = default_temperatures(h, indptr, data)
    n = len(h)
    rows = []
    DASampler().sample(bqm, num_reads=1, num_sweeps=10, seed=0)  # JIT warm-up
    started = time.perf_counter()
    cpu = DASampler().sample(bqm, num_reads=4, num_sweeps=sweeps, seed=0)
    wall = time.perf_counter() - started
    rows.append(_throughput_row("cpu (numba)", 4, sweeps, n, wall, float(cpu.first.energy)))
    if gpu is None:
        return rows
    dense = dense_couplings(indptr, indices, data, n)
    sparse = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n, n))
    schedule = np.geomspace(hot, cold, sweeps)
    for fused in (False, True):
        couplings = sparse if fused else dense  # what each implementation works with
        for reads in reads_list:
            states = np.random.default_rng(0).integers(0, 2, size=(reads, n)).astype(np.int8)
            ArrayRuns(h, couplings, states, 0, gpu, fused).iterate(schedule[:5], 1, cold)
            gpu.cuda.get_current_stream().synchronize()  # after the warm-up
            started = time.perf_counter()
            runs = ArrayRuns(h, couplings, states, 0, gpu, fused)
            runs.iterate(schedule, 1, cold)
            best = runs.result(states.copy())
            wall = time.perf_counter() - started
            label = "gpu fused kernel" if fused else "gpu array operations"
            energy = float(best.min() + bqm.offset)
            rows.append(_throughput_row(label, reads, sweeps, n, wall, energy))
    return rows


def _throughput_row(label: str, reads: int, sweeps: int, n: int, wall: float, energy: float):
    row = {"implementation": label, "reads": reads, "sweeps": sweeps, "variables": n}
    row.update(wall_s=wall, trials_per_s=reads * sweeps * n / wall, best_energy=energy)
    print(
        f"throughput {label:>22} x{reads:<5} {wall:7.3f}s {row['trials_per_s']:.2e} trials/s "
        f"best {energy:.0f}",
        flush=True,
    )
    return row


def machine(gpu: ModuleType | None) -> str:
    text = f"{platform.machine()}, {os.cpu_count()} CPUs"
    if gpu is not None:
        name = gpu.cuda.runtime.getDeviceProperties(0)["name"]
        text += f", {name.decode() if isinstance(name, bytes) else name} (CuPy {gpu.__version__})"
    return text


def instances(seed: int) -> list[tuple[str, object, int]]:
    cases = [
        (f"exact 30x30 r={r}", make_exact_rank(30, 30, r, random_state=seed + r), r)
        for r in range(1, 6)
    ]
    cases.append(("bernoulli0.5 30x38 r=5", make_bernoulli(30, 38, 0.5, random_state=seed), 5))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limits", type=float, nargs="+", default=[1.0])
    parser.add_argument("--num-reads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gpu-reads", type=int, nargs="*", default=[], help="read counts of da on the GPU"
    )
    parser.add_argument(
        "--throughput-sweeps", type=int, default=1000, help="sweeps of the throughput table"
    )
    parser.add_argument("--name", default="da", help="stem of the result files")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()

    gpu = gpu_module() if args.gpu_reads else None
    pool = samplers(args.gpu_reads, gpu)
    rows = []
    for name, A, rank in instances(args.seed):
        compiled = compile_model("formulation1", A, rank)
        bqm = compiled.to_bqm(lam=1.0)
        for sampler, extra in pool.values():  # warm-up: JIT / kernel compile, library start-up
            sampler.sample(bqm, **{"num_reads": 1, "seed": 0, "time_limit": 0.05, **extra})
        for limit in args.time_limits:
            for label, (sampler, extra) in pool.items():
                options = {"num_reads": args.num_reads, "seed": args.seed, **extra}
                started = time.perf_counter()
                sampleset = sampler.sample(bqm, time_limit=limit, **options)
                wall = time.perf_counter() - started
                best = compiled.decode(sampleset)[0]
                row = {
                    "instance": name,
                    "variables": bqm.num_variables,
                    "norm_A": int(A.sum()),
                    "time_limit_s": limit,
                    "sampler": label,
                    "num_reads": options["num_reads"],
                    "num_sweeps": sampleset.info.get("num_sweeps"),
                    "best_energy": float(sampleset.first.energy),
                    "decoded_error": int(best.error),
                    "decoded_broken": {k: int(v) for k, v in best.broken.items()},
                    "wall_s": wall,
                }
                rows.append(row)
                print(
                    f"{name:>24} {limit:>4}s {label:>11} energy {row['best_energy']:>8.1f} "
                    f"decoded error {row['decoded_error']:>4} wall {wall:.2f}s",
                    flush=True,
                )
    largest = compile_model("formulation1", instances(args.seed)[-1][1], 5).to_bqm(lam=1.0)
    speed = throughput(largest, args.throughput_sweeps, args.gpu_reads, gpu)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = f"bench/bench_da.py --time-limits {' '.join(map(str, args.time_limits))} "
    command += f"--num-reads {args.num_reads} --seed {args.seed}"
    if args.gpu_reads:
        command += f" --gpu-reads {' '.join(map(str, args.gpu_reads))} --name {args.name}"
    meta = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(gpu),
        "lam": 1.0,
    }
    result = {"meta": meta, "rows": rows, "throughput": speed}
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    lines = [
        "# DA algorithm vs neal vs openjij-sa on Formulation 1 (lam = 1), equal wall time",
        "",
        f"Command: `{meta['command']}`; {meta['date']}; {meta['machine']} (the CPU samplers "
        "use one core each). Lowest energy over the reads; `error` is ||A-UVᵀ||² of the "
        "decoded best sample (U, V read from the sample; product constraints may be broken "
        f"at lam = 1). CPU samplers run {args.num_reads} reads"
        + ("; `da-gpu xR` runs R reads at once on the GPU." if gpu is not None else "."),
        "",
        "| instance | N | time (s) | " + " | ".join(f"{s} energy / error" for s in pool) + " |",
        "|---|---|---|" + "---|" * len(pool),
    ]
    for name, _, _ in instances(args.seed):
        for limit in args.time_limits:
            cells = {
                r["sampler"]: r
                for r in rows
                if r["instance"] == name and r["time_limit_s"] == limit
            }
            best = min(c["best_energy"] for c in cells.values())
            parts = []
            for label in pool:
                c = cells[label]
                mark = "**" if c["best_energy"] == best else ""
                parts.append(f"{mark}{c['best_energy']:.0f}{mark} / {c['decoded_error']}")
            variables = next(iter(cells.values()))["variables"]
            lines.append(f"| {name} | {variables} | {limit} | " + " | ".join(parts) + " |")
    lines += [
        "",
        f"## Throughput: {args.throughput_sweeps} sweeps per read, {speed[0]['variables']} "
        "variables (bernoulli0.5 30x38 r=5)",
        "",
        "Flip trials per second = reads x sweeps x variables / wall time (the numba kernel "
        "skips trials it can prove rejected, so its count is nominal).",
        "",
        "| implementation | reads | wall (s) | trials/s | best energy |",
        "|---|---|---|---|---|",
    ]
    for row in speed:
        lines.append(
            f"| {row['implementation']} | {row['reads']} | {row['wall_s']:.3f} | "
            f"{row['trials_per_s']:.2e} | {row['best_energy']:.0f} |"
        )
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
