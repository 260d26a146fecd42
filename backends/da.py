"""``da``: the Digital Annealer's parallel-trial algorithm for any BQM (numba; numpy or CuPy).

An open emulation of the algorithm of Aramon et al. (2019) described in
:mod:`bmfdsl.solvers.da._kernel`: every iteration tries all N single flips "in parallel", applies
one accepted flip chosen uniformly, and raises an escape offset while nothing is accepted.
One iteration makes as many flip trials as one sweep of simulated annealing, so ``num_sweeps``
counts iterations. A replica-exchange mode runs a temperature ladder instead of a schedule.

``device`` picks the implementation: ``"cpu"`` (default) is the numba kernel, one run after
another with sparse couplings; ``"gpu"`` (CuPy, ``pip install "bmfdsl[gpu]"``) runs all reads
at once, one thread block each, in the fused CUDA kernel of :mod:`bmfdsl.solvers.da._cuda`
(sparse couplings); ``"numpy"`` is the same algorithm as whole-array numpy code with dense
couplings (:mod:`bmfdsl.solvers.da._array`), the CPU reference of the GPU path. Both array
devices run ``mode="anneal"`` only and draw their own random numbers, so for one seed their
samples differ from the CPU kernel's.

This adapter checks the keywords, calls :func:`bmfdsl.solvers.da.run_da` (the driver: rounds,
restarts within a time limit, replicas, the device) and builds the SampleSet.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import (
    BackendSampler,
    Initialized,
    check_num_reads,
    check_seed,
    check_time_limit,
    keyword_defaults,
    round_seeds,
)
from bmfdsl.errors import InvalidParameterError
from bmfdsl.solvers.da import (
    DA_DEVICES,
    DA_MODES,
    DAModel,
    DARun,
    DASettings,
    available_array_devices,
    default_temperatures,
    prepare_bqm,
    run_da,
)
from bmfdsl.validation import check_count, check_real

__all__ = ["DASampler"]


class DASampler(BackendSampler, Initialized):
    """The Digital Annealer algorithm on the CPU or a GPU, for any binary quadratic model.

    >>> bqm = dimod.BinaryQuadraticModel({"a": 1.0, "b": -1.0}, {("a", "b"): -3.0}, 0, "BINARY")
    >>> best = DASampler().sample(bqm, num_reads=4, num_sweeps=200, seed=1).first
    >>> {v: int(x) for v, x in best.sample.items()}, float(best.energy)
    ({'a': 1, 'b': 1}, -3.0)
    """

    name: ClassVar[str] = "da"
    descriptions: ClassVar[dict[str, str]] = {
        "num_reads": "independent runs; the best state of each run is returned",
        "seed": "seed in [0, 2**31); the same seed gives the same samples",
        "num_sweeps": "iterations per anneal (None: 10 x the number of variables, at least "
        "1000); each iteration tries all N flips in parallel",
        "time_limit": "seconds for all reads: each read anneals again from a random state while "
        "time is left and keeps its best (an anneal that cannot finish in time follows the "
        "clock)",
        "initial_states": "warm starts (one or more full states); missing reads start random",
        "temperature_range": "(hot, cold) temperatures (None: from the model's bias scale)",
        "temperature_interval": "iterations per temperature step",
        "offset_increase": "escape-offset increment per rejected iteration (None: the cold "
        "temperature)",
        "mode": "'anneal' or 'replica-exchange'",
        "num_replicas": "replicas per run in replica-exchange mode",
        "swap_interval": "iterations between replica swaps",
        "device": "'cpu' (numba), 'gpu' (CuPy: all reads at once in a fused CUDA kernel) or "
        "'numpy' (the GPU algorithm as dense numpy code); mode 'anneal' only off the CPU",
    }

    @property
    def properties(self) -> dict[str, Any]:
        """Name, parameter descriptions, the modes, the default device and the devices whose
        modules are importable (``"gpu"`` still needs a usable CUDA device when used)."""
        return {
            **super().properties,
            "modes": list(DA_MODES),
            "device": keyword_defaults(self._sample)["device"],
            "available_devices": ["cpu", *available_array_devices()],
        }

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int = 10,
        seed: int | None = None,
        num_sweeps: int | None = None,
        time_limit: float | None = None,
        initial_states: Any = None,
        temperature_range: tuple[float, float] | None = None,
        temperature_interval: int = 1,
        offset_increase: float | None = None,
        mode: str = "anneal",
        num_replicas: int = 8,
        swap_interval: int = 10,
        device: str = "cpu",
    ) -> dimod.SampleSet:
        h, indptr, indices, data, labels = prepare_bqm(bqm)
        settings = _check_settings(
            (h, indptr, indices, data),
            num_reads=num_reads,
            seed=seed,
            num_sweeps=num_sweeps,
            time_limit=time_limit,
            temperature_range=temperature_range,
            temperature_interval=temperature_interval,
            offset_increase=offset_increase,
            mode=mode,
            num_replicas=num_replicas,
            swap_interval=swap_interval,
            device=device,
        )
        states = self._start_states(bqm, initial_states, settings.num_reads, settings.seed)
        read_seeds = round_seeds(settings.seed, settings.num_reads)
        run = run_da(settings, (h, indptr, indices, data), states, read_seeds)
        samples = run.states if bqm.vartype is dimod.BINARY else 2 * run.states - 1
        sampleset = dimod.SampleSet.from_samples_bqm((samples, labels), bqm)
        sampleset.info.update(
            _info(settings, run),
            timings={"compile": run.compile_seconds, "anneal": run.anneal_seconds},  # + "total"
        )
        return sampleset

    def _start_states(
        self,
        bqm: dimod.BinaryQuadraticModel,
        initial_states: Any,
        num_reads: int,
        seed: int | None,
    ) -> np.ndarray:
        """BINARY start states, one per read: the given ones first, then random ones."""
        rng = np.random.default_rng(seed)
        states = rng.integers(0, 2, size=(num_reads, bqm.num_variables), dtype=np.int8)
        if initial_states is not None:
            given = self.given_states(bqm, initial_states)
            if bqm.vartype is dimod.SPIN:
                given = ((given + 1) // 2).astype(np.int8)
            count = min(len(given), num_reads)
            states[:count] = given[:count]
        return states


def _check_settings(
    model: DAModel,
    *,
    num_reads: Any,
    seed: Any,
    num_sweeps: Any,
    time_limit: Any,
    temperature_range: Any,
    temperature_interval: Any,
    offset_increase: Any,
    mode: Any,
    num_replicas: Any,
    swap_interval: Any,
    device: Any,
) -> DASettings:
    """The keywords of ``sample`` checked; temperatures default to ``model``'s bias scale."""
    num_reads = check_num_reads(num_reads)
    seed = check_seed(seed)
    _check_mode_and_device(mode, device)
    h, indptr, _, data = model
    if temperature_range is None:
        hot, cold = default_temperatures(h, indptr, data)
    else:
        hot, cold = _check_range(temperature_range)
    if num_sweeps is not None:
        num_sweeps = check_count(num_sweeps, "num_sweeps")
    return DASettings(
        num_reads=num_reads,
        seed=seed,
        mode=mode,
        device=device,
        num_sweeps=num_sweeps,
        time_limit=None if time_limit is None else check_time_limit(time_limit),
        hot=hot,
        cold=cold,
        interval=check_count(temperature_interval, "temperature_interval"),
        increase=check_real(
            cold if offset_increase is None else offset_increase, "offset_increase", strict=True
        ),
        replicas=check_count(num_replicas, "num_replicas"),
        swap_interval=check_count(swap_interval, "swap_interval"),
    )


def _check_mode_and_device(mode: Any, device: Any) -> None:
    if mode not in DA_MODES:
        raise InvalidParameterError(f"mode must be one of {list(DA_MODES)}; got {mode!r}")
    if device not in DA_DEVICES:
        raise InvalidParameterError(f"device must be one of {list(DA_DEVICES)}; got {device!r}")
    if device != "cpu" and mode != "anneal":
        raise InvalidParameterError(
            f"device {device!r} runs mode 'anneal' only; use device='cpu' for {mode!r}"
        )


def _info(settings: DASettings, run: DARun) -> dict[str, Any]:
    """What the sample set's ``info`` says about the run."""
    replicas = settings.replicas if settings.mode != "anneal" else 1
    sweeps, rounds = run.sweeps_per_anneal, run.anneals_per_read
    return {
        "algorithm": "digital-annealer (parallel trial, escape offset)",
        "mode": settings.mode,
        "device": settings.device,
        "num_sweeps": sweeps,
        "num_anneals_per_read": rounds,
        "temperature_range": (settings.hot, settings.cold),
        "offset_increase": settings.increase,
        # the work done: counted, so equal seeds without time_limit give equal samples
        "work": {
            "reads": settings.num_reads,
            "anneals": round(rounds * settings.num_reads),
            "sweeps": round(sweeps * rounds * settings.num_reads * replicas),
        },
        "deterministic": settings.time_limit is None,
    }


def _check_range(value: Any) -> tuple[float, float]:
    try:
        hot, cold = (float(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"temperature_range must be a pair (hot, cold) of positive numbers; got {value!r}"
        ) from exc
    if not (math.isfinite(hot) and hot >= cold > 0):  # NaN and inf give no schedule
        raise InvalidParameterError(f"temperature_range needs hot >= cold > 0; got ({hot}, {cold})")
    return hot, cold
