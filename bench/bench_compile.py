"""Compile + to_bqm time and peak memory: bmfdsl (registered and user script) vs its peers.

Routes (see ``bench/_compile_routes.py``): ``registered`` (``compile_model("formulation1", A,
5)`` then ``to_bqm(lam=1.0)``), ``user`` (the same script copied to a temporary ``.py`` and
passed by path), ``pyqubo`` (idiomatic PyQUBO), ``amplify`` (Fixstars Amplify polynomial
arrays) and ``jijmodeling`` (JijModeling -> OMMX ``to_qubo``). Each (model, size, route) runs
in a fresh subprocess: its peak resident memory (``ru_maxrss``) is its own and is reported
beyond the RSS read just before building. Every peer's energies are checked against bmfdsl's
BQM on random 0/1 assignments. Writes ``bench/results/compile.json`` and ``compile.md``.

    python bench/bench_compile.py                          # 30x38, 100x100, 300x300; r = 5
    python bench/bench_compile.py --sizes 30x38 --routes registered,pyqubo --repeats 1
    python bench/bench_compile.py --pyqubo-all --pyqubo-timeout 600
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib.metadata
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

from _compile_routes import MODELS, ROUTES, UserScript, builder, warm_imports  # noqa: E402

SIZES = ((30, 38), (100, 100), (300, 300))
RANK = 5
#: a first run slower than this (s) is not repeated
SLOW_S = 20.0
#: random assignments (the last one feasible: W = UVᵀ products) for the energy check
CHECK_SAMPLES = 5
PACKAGES = ("bmfdsl", "numpy", "dimod", "pyqubo", "amplify", "jijmodeling", "ommx")
ROUTE_NOTES = {
    "registered": "`compile_model(name, A, 5)` + `to_bqm(lam=1.0)`; re-weight: "
    "`to_bqm(lam=2.0)` on the same compiled model",
    "user": "the same, the model script copied to a temporary `.py` and passed by path",
    "pyqubo": "`Array.create`, `W[k, i, j]`, `Constraint(Placeholder('lam') * penalty)` per "
    "group, `compile()` + `to_bqm(feed_dict)`; re-weight: `to_bqm(feed_dict={'lam': 2.0})`",
    "amplify": "`VariableGenerator().array` polynomial arrays, numpy-like algebra; the penalty "
    "its own polynomial, `Model(objective + lam * penalty)`; 'to_bqm' is "
    "`Model.to_unconstrained_poly().as_dict()`; re-weight: `Model(objective + 2 * penalty)` + the "
    "same extraction (polynomials reused). Amplify's `Constraint(p, eq=0, penalty=p)` gives the "
    "same QUBO but its constructor alone took 1.9 s at 30x38 and 17.7 s at 60x60 (about "
    "quadratic), so the penalty is added as a polynomial",
    "jijmodeling": "`Problem.define` with a `Placeholder` lam multiplying the penalty in the "
    "objective; compile = `problem.eval(data)` (OMMX instance), 'to_bqm' = `instance.to_qubo()`; "
    "re-weight: `eval` with lam = 2 + `to_qubo()` (no cheaper documented path)",
}


# -- child ---------------------------------------------------------------------------------------
def _current_rss_mb() -> float:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_hwm() -> bool:
    """Reset this process's RSS high-water mark (Linux ``clear_refs``), for a cross-check."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def _hwm_mb() -> float | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def instance(m: int, n: int) -> np.ndarray:
    """The benchmark matrix: Bernoulli(0.5) from ``default_rng(0)``."""
    return (np.random.default_rng(0).random((m, n)) < 0.5).astype(np.int8)


def _check_energies(route: str, model: str, A: np.ndarray, r: int, built) -> dict:
    """Energies of bmfdsl's BQM and of ``built`` on the same assignments."""
    from bmfdsl import compile_model

    compiled = compile_model(model, A, r)
    labels = compiled.variables
    bqm = compiled.to_bqm(lam=1.0)
    rng = np.random.default_rng(1)
    X = (rng.random((CHECK_SAMPLES, len(labels))) < 0.5).astype(np.int8)
    m, n = A.shape
    U = (rng.random((m, r)) < 0.5).astype(np.int8)
    V = (rng.random((n, r)) < 0.5).astype(np.int8)
    X[-1] = compiled.encode_array(U, V)
    ours = np.asarray(bqm.energies((X, labels)), dtype=float)
    residual = float(((A - (U @ V.T)) ** 2).sum())  # Boolean-free product: feasible W = u_ik v_jk
    out = {
        "feasible_energy": ours[-1],
        "feasible_equals_residual": bool(np.isclose(ours[-1], residual)),
    }
    if route == "registered":  # the reference itself: check its feasible energy instead
        feasible = "yes" if out["feasible_equals_residual"] else "NO"
        out["energies_checked"] = f"reference (feasible energy = ||A - UVᵀ||²: {feasible})"
        return out
    theirs = built.energies(X, labels)
    difference = float(np.max(np.abs(theirs - ours)))
    scale = float(np.max(np.abs(ours)))
    constant = theirs - ours
    out |= {"max_abs_difference": difference, "energy_scale": scale}
    if difference <= 1e-9 * max(1.0, scale):
        out["energies_checked"] = f"yes ({CHECK_SAMPLES} assignments, offset included)"
    elif np.ptp(constant) <= 1e-9 * max(1.0, scale):
        out["energies_checked"] = (
            f"up to a constant ({constant[0]:+g}): the peer's QUBO drops or moves the offset"
        )
    else:
        out["energies_checked"] = f"no: energies differ by up to {difference:g}"
    return out


def child(spec: dict) -> dict:
    route, model = spec["route"], spec["model"]
    m, n, r, repeats = spec["m"], spec["n"], spec["rank"], spec["repeats"]
    A = instance(m, n)
    warm_imports(route)
    user = UserScript() if route == "user" else None
    build = builder(route, user)
    try:
        build(model, instance(6, 5), 2, 1.0)  # warm lazy imports and caches on a tiny model
        gc.collect()
        baseline = _current_rss_mb()
        peak_before = _peak_rss_mb()
        hwm_reset = _reset_hwm()
        runs, reweights, built = [], [], None
        first_peak = None
        for _ in range(repeats):
            built = None
            gc.collect()
            built = build(model, A, r, 1.0)
            if first_peak is None:  # one compile + to_bqm, before any re-weighted copy exists
                first_peak = _hwm_mb() if hwm_reset else _peak_rss_mb()
            runs.append((built.compile_s, built.to_bqm_s))
            start = time.perf_counter()
            built.reweight(2.0)
            reweights.append(time.perf_counter() - start)
            if sum(runs[0]) > SLOW_S:
                break
        peak = _peak_rss_mb()
        hwm = _hwm_mb() if hwm_reset else None
        assert built is not None
        best = min(runs, key=sum)
        row = {
            "variables": built.variables,
            "interactions": built.interactions,
            "compile_s": best[0],
            "to_bqm_s": best[1],
            "total_s": sum(best),
            "reweight_s": min(reweights),
            "runs": len(runs),
            "baseline_rss_mb": baseline,
            "peak_rss_mb": peak,
            "peak_before_mb": peak_before,
            "peak_beyond_baseline_mb": peak - baseline,
            # cross-check: the high-water mark reset at the baseline (Linux only)
            "hwm_beyond_baseline_mb": None if hwm is None else hwm - baseline,
            # the first compile + to_bqm alone (the re-weights above keep two BQMs alive)
            "build_peak_beyond_baseline_mb": None if first_peak is None else first_peak - baseline,
        }
        if built.nonzero_interactions is not None:
            row["nonzero_interactions"] = built.nonzero_interactions
        if route in ("registered", "user"):
            compiled = built.handle[0]
            row["bqm_estimate_bytes"] = compiled.memory_estimate
            row["bqm_in_use_bytes"] = _bytes_in_use_by(lambda: compiled.to_bqm(lam=1.0))
        if not spec.get("no_check"):
            row |= _check_energies(route, model, A, r, built)
        else:
            row["energies_checked"] = "no (--no-check)"
        return row
    finally:
        if user is not None:
            user.cleanup()


# -- parent --------------------------------------------------------------------------------------
def measure(spec: dict, timeout: float) -> dict:
    row = {
        "model": spec["model"],
        "shape": f"{spec['m']}x{spec['n']}",
        "rank": spec["rank"],
        "route": spec["route"],
    }
    args = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    start = time.perf_counter()
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return row | {"status": f"timeout after {timeout:.0f} s"}
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or "").strip().splitlines() or [f"exit status {exc.returncode}"]
        if exc.returncode < 0:
            lines.append(f"killed by signal {-exc.returncode}")
        return row | {"status": "error: " + lines[-1][:300], "wall_s": time.perf_counter() - start}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return row | {"status": "ok", "wall_s": time.perf_counter() - start} | result


def _versions() -> dict:
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def _available(route: str) -> str | None:
    """``None`` when the route's package imports, else why not."""
    package = {"pyqubo": "pyqubo", "amplify": "amplify", "jijmodeling": "jijmodeling"}.get(route)
    if package is None:
        return None
    # find_spec, not import: the parent stays small, and a child's ru_maxrss starts at the
    # RSS of the process it was forked from (Linux keeps the pre-exec high-water mark)
    if importlib.util.find_spec(package) is None:
        return f"unavailable: {package} is not installed (pip install -e '.[bench]')"
    if route == "jijmodeling" and importlib.util.find_spec("ommx") is None:
        return "unavailable: to_qubo needs ommx, not installed"
    return None


def _cell(text: str) -> str:
    """Text for a markdown table cell: pipes escaped."""
    return text.replace("|", "\\|")


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


_MALLINFO2_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS.split()]


def _bytes_in_use_by(make: Any) -> int | None:
    """Heap bytes still in use after ``make()`` while its result lives (glibc ``mallinfo2``).

    Unlike RSS, this counts what the object holds, not memory freed earlier and kept by the
    allocator: for a BQM, its adjacency vectors (with their growth slack) and label maps.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return None

    def in_use() -> int:
        info = libc.mallinfo2()
        return int(info.uordblks + info.hblkhd)

    gc.collect()
    before = in_use()
    result = make()
    used = in_use() - before
    del result
    return used


def to_markdown(rows: list[dict], models: list[str]) -> str:
    out = []
    for model in models:
        out += [
            f"\n## {model}\n",
            "| A | route | variables | interactions | compile+to_bqm (s) | re-weight (s) "
            "| peak of one build (MB) | BQM in use (MB) | peak / BQM | energies checked "
            "| status |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for row in rows:
            if row["model"] != model:
                continue
            ok = row["status"] == "ok"
            peak = row.get("build_peak_beyond_baseline_mb")
            bqm_bytes = row.get("bqm_in_use_bytes")
            ratio = None
            if ok and bqm_bytes and peak is not None:
                ratio = peak * 2**20 / bqm_bytes
            interactions = _fmt(row.get("interactions"), ",")
            nonzero = row.get("nonzero_interactions")
            if nonzero is not None and nonzero != row.get("interactions"):
                interactions += f" ({nonzero:,} nonzero)"
            total = _fmt(row.get("total_s"), ".3f")
            if ok and row.get("runs", 1) > 1:
                total += f" (min of {row['runs']})"
            out.append(
                f"| {row['shape']} | {row['route']} | {_fmt(row.get('variables'), ',')} "
                f"| {interactions} | {total} "
                f"| {_fmt(row.get('reweight_s'), '.3f')} "
                f"| {_fmt(peak, '.0f')} "
                f"| {_fmt(None if bqm_bytes is None else bqm_bytes / 2**20, '.0f')} "
                f"| {_fmt(ratio, '.1f')} "
                f"| {_cell(row.get('energies_checked', ''))} | {_cell(row['status'])} |"
            )
    return "\n".join(out) + "\n"


def render(meta: dict, rows: list[dict], models: list[str], repeats: int) -> str:
    """compile.md from the run's metadata and rows."""
    versions = ", ".join(f"{name} {version}" for name, version in meta["packages"].items())
    md = "# Compile + to_bqm: bmfdsl vs PyQUBO, Amplify, JijModeling\n\n"
    md += f"Command: `{meta['command']}` on {meta['date']}.\n\n"
    md += (
        f"Machine: {meta['nproc']} CPUs, {meta['platform']}, Python {meta['python']}; "
        f"{versions}.\n\n"
    )
    md += (
        f"Rank {meta['rank']}; {meta['instance']}. Each (model, size, route) runs in a fresh "
        "subprocess that first builds a tiny model (imports, caches), then reads its RSS "
        "(the baseline) and builds the instance up to "
        f"{repeats} times (one when the first run takes over {SLOW_S:.0f} s); "
        "'compile+to_bqm' is the fastest run, 're-weight' rebuilds the QUBO for lam = 2 "
        "from the compiled model. 'peak of one build' is the RSS high-water mark (Linux "
        "`VmHWM`, reset at the baseline with `/proc/self/clear_refs`) right after the first "
        "compile + to_bqm, beyond the baseline: the compiled model, the BQM and every "
        "temporary. 'BQM in use' is what one `to_bqm` result holds (glibc `mallinfo2` bytes "
        "in use while it lives: dimod's adjacency vectors and label maps), and 'peak / BQM' "
        "their ratio. 'energies checked' compares the route's "
        f"QUBO energies (constant included) with bmfdsl's BQM on {CHECK_SAMPLES} assignments "
        f"({CHECK_SAMPLES - 1} uniformly random, one feasible: random U, V and W = UVᵀ "
        "products), after the timings and memory are read.\n\n"
        "bmfdsl builds and checks instances of up to 100,000 m·n·r cells at `compile_model`; "
        "larger ones (300x300) are checked on sub-instances there and built at the first "
        "`to_bqm`, so compare the totals. Interactions are the stored quadratic terms (PyQUBO "
        "also stores some whose coefficients cancel to zero). compile.json also has each "
        "phase's time, the baseline, `peak_beyond_baseline_mb` (`ru_maxrss` over all runs, "
        "re-weights included: two BQMs alive) and `bqm_estimate_bytes` (bmfdsl's "
        "`memory_estimate`).\n\n"
    )
    md += "Routes:\n\n" + "".join(f"- `{k}`: {v}\n" for k, v in meta["routes"].items())
    md += to_markdown(rows, models)
    return md


def _sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for item in text.split(","):
        m, _, n = item.strip().lower().partition("x")
        sizes.append((int(m), int(n)))
    return sizes


def _choices(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    for item in chosen:
        if item not in allowed:
            raise SystemExit(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")
    return chosen


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(f"{m}x{n}" for m, n in SIZES), help="e.g. 30x38,100x100"
    )
    parser.add_argument("--models", default=",".join(MODELS), help="formulation1,formulation2")
    parser.add_argument("--routes", default=",".join(ROUTES), help=",".join(ROUTES))
    parser.add_argument("--rank", type=int, default=RANK)
    parser.add_argument("--repeats", type=int, default=3, help="runs per child; the min is kept")
    parser.add_argument("--pyqubo-timeout", type=float, default=120.0)
    parser.add_argument("--pyqubo-all", action="store_true", help="run PyQUBO on 300x300 too")
    parser.add_argument("--timeout", type=float, default=600.0, help="other routes' time limit")
    parser.add_argument("--no-check", action="store_true", help="skip the energy checks")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sizes = _sizes(args.sizes)
    models = _choices(args.models, MODELS, "model")
    routes = _choices(args.routes, ROUTES, "route")

    rows = []
    for model in models:
        for m, n in sizes:
            estimate = None
            for route in routes:
                spec = {
                    "route": route,
                    "model": model,
                    "m": m,
                    "n": n,
                    "rank": args.rank,
                    "repeats": max(1, args.repeats),
                    "no_check": args.no_check,
                }
                base = {"model": model, "shape": f"{m}x{n}", "rank": args.rank, "route": route}
                reason = _available(route)
                if reason is not None:
                    row = base | {"status": reason}
                elif route == "pyqubo" and m * n > 100 * 100 and not args.pyqubo_all:
                    row = base | {"status": "skipped (> 100x100; --pyqubo-all runs it)"}
                else:
                    timeout = args.pyqubo_timeout if route == "pyqubo" else args.timeout
                    row = measure(spec, timeout)
                estimate = estimate or row.get("bqm_estimate_bytes")
                if row["status"] == "ok" and estimate and "bqm_estimate_bytes" not in row:
                    row["bqm_estimate_bytes"] = estimate
                print(json.dumps(row), flush=True)
                rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": "python bench/bench_compile.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "nproc": os.cpu_count(),
        "packages": _versions(),
        "rank": args.rank,
        "repeats": max(1, args.repeats),
        "instance": "A = (np.random.default_rng(0).random((m, n)) < 0.5), int8",
        "routes": {route: ROUTE_NOTES[route] for route in routes},
    }
    (args.out / "compile.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    md = render(meta, rows, models, meta["repeats"])
    (args.out / "compile.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
