"""The default answer is the best of several seeds, each finished on the full data.

A QUBO core solve alone misses structure that a classical method finds (planted sparse
blocks, rank 10 on the UCI sets). So the default :func:`~bmfdsl.factorize` (formulation 1 on
the default backend, nothing constrained) also tries, beside the core solve:

* the paper's comparison methods (``baseline``, ``thresholded``, ``penalized``) on the core,
  each drawing from a copy of the generator in the state ``method=...`` would give it: on a
  core of at most :data:`METHOD_CELLS` entries (a sampled one: :data:`SAMPLED_METHOD_CELLS`)
  the default then holds each method's own answer among its candidates, so it is never worse
  than any of them on the same input and seed (where the screening below keeps them); a
  larger core hands them its first rows (the sampled rows are independent draws, so a prefix
  is a smaller sample), or a uniform sample of its rows when it is all of ``A``, except for
  ``baseline``, which takes an unsampled ``A`` whole up to :data:`BASELINE_WHOLE_CELLS`
  entries, and
  ``thresholded`` and ``penalized``, which take an unsampled ``A`` whole up to
  :data:`METHODS_BOTH_CELLS` entries as their products count them (:func:`method_cells`:
  sparse data by its ones; their row sample's answers then being the seeds
  ``"thresholded-rows"`` and ``"penalized-rows"``), and ``thresholded`` beyond that also on it
  whole up to
  :data:`THRESHOLDED_WHOLE_CELLS` entries (the seed ``"thresholded-whole"``: on dense
  random data no row sample shows what it finds), and both, past :data:`METHODS_BOTH_CELLS`
  up to :data:`FULL_POLISH_CELLS` entries, also on a second, wider row sample
  (:func:`wide_sample_rows`: the seeds ``"thresholded-wide"`` and ``"penalized-wide"``);
* on a sampled run, the native solver's structure seeds (NMF-threshold, row and column
  clusters) on a uniform sample of :func:`structure_sample_rows` rows, sized from rank and
  shape so that every component is seen, independent of ``sample_rows`` (a larger sample never
  loses the seeds a smaller one tried).

Each seed's ``V`` gives ``U`` on the full data by exact BLS (unless the seed already holds the
full ``U``), then ALS polishes the pair on the full data; the pipeline keeps the best. A seed
that starts exactly where an earlier one does is not finished again (it would end the same).
On data beyond :data:`FULL_POLISH_CELLS` entries the seeds are first screened (BLS and ALS on
the uniform sample) and only some are finished on the full data, so the full-data passes stay
a small multiple of one method's: each comparison method's own answer (on sparse data, where
the sample ranks starts well, only those that come within :data:`METHOD_SCREEN_MARGIN` of the
core solve's answer there), and at most :data:`SHORTLIST` other seeds that beat it; a seed
whose screened ``V`` equals one already kept or the answer's (column order aside; see
:func:`shortlist`) is skipped, except, on dense data, a method's own answer. Last,
:func:`repair_seeds` swaps one component of each of the :func:`repair_start_count` best
answers for a block of ones it leaves uncovered (where the methods saw row samples only, the
best answer's weakest components also for the other answers' components:
:func:`crossovers`), judged on :func:`screening_rows` (on more than
:data:`REPAIR_RANK_CELLS` entries, only the swaps :func:`ranking_rows` rank best and that
beat the answer there), and the pipeline finishes such a start too when the swap helps there (a
later answer's only when it also beats the best one there). The work is counted, not timed
(fixed iteration counts, ALS at most 20 solves), so a seed gives bit-identical answers.
"""

from __future__ import annotations

import contextlib
import copy
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from bmfdsl.linalg import BinaryMatrix, SparseMatrix, default_threads, uncovered_ones
from bmfdsl.pipeline._background import close_with_call

#: Largest core (entries) the comparison methods take whole; a larger one hands them a prefix
#: of its rows (penalized runs up to 1,000 NMF iterations: 0.02-0.05 s at this size and rank 5).
METHOD_CELLS = 2**17
#: The same for a sampled core: a 200-row core of 2,000 columns (``sample_rows="auto"`` at rank
#: 10) stays whole, so that the default holds each method's own answer there too (a 65-row
#: prefix lost 6% to thresholded's on planted blocks, 100,000 x 2,000, r = 10, and a 163-row
#: prefix 2.2% to penalized's on dense planted blocks, 60,000 x 800, r = 10; penalized then
#: takes 0.11 -> 0.18 s on the first, its products summed over the ones of the core).
SAMPLED_METHOD_CELLS = 2**19
#: Largest unsampled core (entries) ``thresholded`` and ``penalized`` take whole beside their
#: row sample (those seeds named ``"thresholded-rows"``, ``"penalized-rows"``) once the core is
#: past :data:`METHOD_CELLS`: the default then holds their own answers. On noisy Boolean data
#: at ranks 6-13 (market baskets, mixtures) the row sample's answers had lost to the whole's
#: by up to 2% (basket-like 2,567 x 184, r = 8: 15,065 against penalized's 14,942), and on
#: leukemia's transpose, 38 x 4,806, r = 10, to thresholded's (25,740 against 25,730). The
#: sample's answers stay seeds: on leukemia and its transpose at r = 3, 7, 10 and 12
#: thresholded's ended best in 3 of the 8 runs, which the whole's alone left 0.02%, 0.1% and 3%
#: worse. The core solve meanwhile gets :data:`BOTH_CORE_WORK_SHARE` of its budget. Beyond
#: 2^20 entries the two methods cost more than the rest of the run: taken whole up to 2^22,
#: 46 runs of 1-4 million entries took 2.6x the time in all, to fix the 4 that had lost to
#: one of them (9 better in all, 2 worse). The entries are counted as the methods' products
#: pass over them (:func:`method_cells`): on sparse data their products sum over the ones,
#: so a sparse core of many more entries costs them as little. On 34 runs of power-law,
#: sparse basket, rare-variant and sparse Boolean data of 1.1-9.2 million entries with up to
#: 2^17 ones, 6 had lost to a method's whole answer (power-law 8,986 x 556, r = 11: 66,552
#: against penalized's 66,269), none now; 11 answers better, none worse, 1.18-1.24x the time.
METHODS_BOTH_CELLS = 2**20
#: Beyond it, on an unsampled core, ``thresholded`` and ``penalized`` also see a second,
#: independent row sample of this many entries (:func:`wide_sample_rows`; the seeds
#: ``"thresholded-wide"`` and ``"penalized-wide"``): their answers on the first one move by up
#: to 1% with the rows drawn, and a method's answer on all of ``A`` could end below the
#: default's (basket-like 8,616 x 183, r = 13: 56,728 against penalized's 56,181, now 55,758).
#: On 88 runs of noisy Boolean, basket-like, genotype-like, power-law, rare-variant and sparse
#: Boolean data of 1.1-16 million entries (r = 3-13) 13 answers better, none worse, in
#: 1.08-1.17x the time in all (two runs; about half thresholded's alone); on 96 fresh Boolean
#: mixtures (4,400-6,000 x 200-260, r = 6-10) 19 better, none worse. 4x the first sample's
#: rows instead of a second sample had left 6 of 53 worse. Only up to
#: :data:`FULL_POLISH_CELLS` entries: on 16 runs of 10-47 million entries 2 answers were
#: better and 1 worse (a Boolean mixture 75,710 x 274, r = 10: 473,746 -> 476,630, where
#: penalized alone gives 472,766).
WIDE_METHOD_CELLS = 2**19
#: Share of the default budget (:func:`~bmfdsl.solvers.native.auto_work_limit`) the core solve
#: gets on an unsampled core where the methods take it whole (:data:`METHODS_BOTH_CELLS`): on
#: three draws of noisy Boolean, basket-like, power-law, genotype-like and MNIST data (98 runs
#: of up to 1.2 million entries) the two methods' whole runs and this share took 7-22% more
#: time than the full budget without them; 12 answers were better (6 of them had lost to a
#: method), 8 worse, by at most 0.27% and none above the best method's (a method's answer
#: can take a repair start that the core's answer had used). With the full budget too: 34-52%
#: more time, and still 2 of 40 worse.
BOTH_CORE_WORK_SHARE = 0.5
#: Largest unsampled core (entries) ``baseline`` takes whole however big the others' share:
#: the greedy costs about one pass (0.5 s at 20,000 x 2,000, r = 10), and a prefix of the
#: rows lost to it there (18,846,586 against its 18,846,410).
BASELINE_WHOLE_CELLS = 2**26
#: Largest unsampled core (entries) ``thresholded`` also takes whole (the seed
#: ``"thresholded-whole"``, its own answer, beside the one on a row sample): on dense random
#: data the structure it finds is the whole matrix's noise, which no row sample shows
#: (Bernoulli(0.5), 5,000 x 1,000, r = 10: 2,288,870 without it, 2,276,881 with it). Its NMF
#: makes 600 passes over ``A`` (a float64 copy of ``A``: 1 GiB at this size).
THRESHOLDED_WHOLE_CELLS = 2**27
#: ... and only where the core solve's answer explains little of ``A``: its error at least this
#: share of the best constant answer's (all zeros or all ones). Dense random data is mostly
#: noise (share 0.9 and above), which thresholded on the whole matrix fits better than a row
#: sample shows; where there is structure the seeds on a sample find it (planted families,
#: MNIST: below 0.5), and the 600 passes over ``A`` only cost time (bench_families' unsampled
#: rows took 2-5x as long with them, no answer changed).
THRESHOLDED_WHOLE_MIN_ERROR_SHARE = 0.75
#: The comparison methods tried as seeds, in the order ``info["portfolio"]`` lists them.
SEED_METHODS = ("baseline", "thresholded", "penalized")
#: Data (entries) up to which every seed is finished on the full data; beyond it the seeds are
#: screened on the structure seeds' sample and at most :data:`SHORTLIST` are finished.
FULL_POLISH_CELLS = 2**24
SHORTLIST = 2
#: Largest share of ones at which the screening sample is passed over as a sparse pattern
#: (planted blocks at 2% ones, 1,000 x 2,000 sample, r = 10: the screening and repair stages
#: took about half the time); beyond it dense float products are faster.
SCREEN_SPARSE_DENSITY = 0.125
#: An unsampled core of more than :data:`SEEDS_ONLY_CELLS` entries with at most
#: :data:`SEEDS_ONLY_DENSITY` ones on its support (its rows and columns with a one) is solved
#: by its own seeds only, as a sampled one (:func:`solved_by_seeds_only`): on 40 sparse planted,
#: planted-block and Bernoulli(0.1) matrices of 2.2-16 million entries (and a review's 46 more)
#: no annealing restart changed the final error (14 of them took 10.1 s in all instead of
#: 17.1 s; sparse planted 20,000 x 300, r = 8: 0.36 s, not 0.98 s). On dense data they can:
#: planted blocks at 30% ones, 11,000 x 200, r = 5, found thresholded's answer (38,349) in the
#: third restart, and the seeds alone ended at 39,749; judged on the support, rows or columns
#: without a one (a review padded that matrix to 27,000 rows) do not make it sparse.
SEEDS_ONLY_CELLS = 2**21
SEEDS_ONLY_DENSITY = 0.125
#: Rounds of :func:`repair_seed` (one component swapped per round; a round that finds no
#: better swap ends it). Two had been set before the final flip descent took several answers
#: (see ``FLIP_STARTS`` in ``pipeline/_factorize.py``); with it, four left 14 of 52 real-data
#: answers better (the UCI sets at k = 2-16, MNIST 2,000 x 784 and the gene-expression sets at
#: r = 3-12; lymp, k = 12: 673 -> 656), none worse, in 5% more time, and 7 of 40 Boolean
#: mixtures of 0.2-3.6 million entries (one 263,451 -> 258,870), none worse, in 24% more
#: time; 54 planted sparse, block and dense runs stayed the same. Three rounds: 13 and 6
#: better; eight: 15 and 9, in 9% and 29% more time.
REPAIR_ROUNDS = 4
#: How many of the finished answers :func:`repair_seeds` starts from (best first, distinct
#: ``V``): the best answer's repair can end above the second-best's (a seed that became the
#: best ended worse after its repair than the answer it displaced would have). On 88 small
#: real-data runs 10 answers got better, none worse (zoo, r = 10: 54 -> 50; 5% more time);
#: on bench_scale 3 of 22 (dense blocks 30,000 x 300, r = 12: 428,763 -> 426,249), on
#: bench_families none of 41; MNIST 8,000 x 784 unsampled, r = 10: 620,881 -> 613,893
#: (thresholded's 619,840). More on larger data (:func:`repair_start_count`).
REPAIR_STARTS = 2
#: ... where the methods take a core whole beside their row samples: their two whole answers
#: join the best ones and can push out an answer whose repair would have ended best (on
#: power-law data of 1.1 million entries at 3% ones, 18 runs at r = 7-13, two starts left 7
#: answers worse than the row samples alone had, by up to 0.3%; three none). On 86 runs of
#: 2^17-2^20 entries 7 answers were better, none worse, in 0.94-1.17x the time (three reruns:
#: this host's timings move that much); four or five starts there: 3 more better, 1.39x.
BOTH_REPAIR_STARTS = 3
#: ... on data past :data:`METHODS_BOTH_CELLS` entries where the methods see a row sample only
#: (the repair costs little there beside the full data's passes): on 88 unsampled runs of
#: noisy Boolean, basket-like, genotype-like, power-law and sparse data of 1-16 million
#: entries (r = 3-13), 10 answers better, none worse, in 0.98x the time in all (basket-like
#: 11,397 x 148, r = 12: 68,185 -> 67,354; a Boolean mixture 7,886 x 275, r = 11: 182,595 ->
#: 181,546); bench_families one better (planted dense 100,000 x 500, r = 5, sampled: 5,172,894
#: -> 5,047,701), bench_scale none, in 10% more time. On small data (the UCI sets and slices)
#: four starts left one of 76 answers worse, 6 better, in 7% more time.
LARGE_REPAIR_STARTS = 4
#: ... where the methods also see a second row sample (:data:`WIDE_METHOD_CELLS`): their two
#: answers there join the best and can push out an answer whose repair would have ended best
#: (Boolean mixtures of 5,288 x 232 and 5,525 x 250 at r = 10: 130,557 -> 131,432 and 42,781
#: -> 42,784 with four starts, the old answers again with five); on the 88 runs of
#: :data:`WIDE_METHOD_CELLS` the answers stayed the same.
WIDE_REPAIR_STARTS = 5
#: ... and there the best answer's repair also tries, each round, every component of the
#: other starts that it lacks in place of each of its this many weakest components (what
#: dropping one costs on the sample; :func:`crossovers`): answers that share most components
#: end in different local minima, and ALS from a recombined start can leave both (basket-like
#: 8,632 x 227, r = 8: 44,287, where thresholded alone gives 43,934; now 43,896, from one of
#: thresholded's 20-item components in place of a 2-item one). On the 88 runs of
#: :data:`WIDE_METHOD_CELLS` 14 answers better, none worse, and the 2 that had lost to a
#: method's answer on all of ``A`` no longer do, in 1.07x the time; on fresh draws 6 of 26
#: better (one loss gone) and 15 of 24 Boolean mixtures, none worse; bench_families 3 of 41
#: better, in 15% more time. For every start's repair: 22 of 88 better, 3 worse, in 1.95x
#: the time; the weakest component alone did not find the example's. Past
#: :data:`FULL_POLISH_CELLS` entries too (:func:`recombines`), where the methods see one row
#: sample: on 16 runs of 10-47 million entries 2 better, none worse, in the same time.
CROSSOVER_POSITIONS = 2
#: Of those recombined starts, how many are judged on the sample: the best after BLS and ALS
#: on :func:`structure_sample_rows` evenly spaced rows of it (where those are at most half).
#: Judging all of them there gave the same 88 answers and bench_families' 3 (tall dense
#: 10,000 x 150, r = 10: 178,853, not 178,906) in 29% more time, not 15%; their exact BLS
#: error alone does not rank them (the example's start was not among the best 8).
CROSSOVER_KEPT = 4
#: The seed whose finished answer the repair also starts from when it is not among the best
#: (:func:`best_distinct`'s ``also``): the greedy builds its answer one component at a time,
#: a structure the other answers do not share. Of 235 runs (small real data; noisy Boolean,
#: basket-like, genotype-like, power-law and sparse data of up to 16 million entries) the
#: repair started from it in 103, and its repair ended best in 15 of them, three times from
#: 2.9-3.9x the best answer's error. As one more start where it was not among them: 2 of 76
#: small runs better (the UCI sets and their slices, MNIST, melanoma and leukemia slices;
#: 30 of lymp's columns, r = 7: 464 -> 459) and 2 of 80 larger ones (noisy Boolean 2,389 x 161,
#: r = 11: 25,664 -> 25,425), none worse, in 7% and 0% more time.
REPAIR_ALSO = "baseline"
#: Data (entries) beyond which the repair ranks its ``r`` swaps on a row sample first and
#: judges only the best :data:`REPAIR_CONFIRMED` of them on all of ``A`` (up to
#: :data:`FULL_POLISH_CELLS`; beyond it every swap is judged on the sample): ``r`` ALS runs on
#: all of ``A`` a round had taken 2.9 of 4.5 s (dense planted blocks, 68,262 x 200, r = 12;
#: now 2.8 s in all, the same answer). On 80 planted, dense and Bernoulli matrices of 2.2-16
#: million entries the runs took 7% less time in all and 2 answers were worse, by at most
#: 0.01%; judging every swap on the sample alone had lost up to 0.9%, on 8 of 60.
REPAIR_RANK_CELLS = 2**21
#: Of them, only those that also beat the answer there, judged the same way, or tie it with
#: other factors (a block between the ranking rows can tie: a review's 20,000 x 200 case): on
#: 112 repairs of planted, dense and sparse matrices of 2.2-16 million entries, every swap
#: that lowered the error on all of ``A`` (24 repairs) had beaten it, and the rule skips 260
#: of 321 full-data runs (dense planted blocks 30,000 x 300, r = 12: the repair 0.18 ->
#: 0.07 s).
REPAIR_CONFIRMED = 3
#: On sparse data (at most :data:`SCREEN_SPARSE_DENSITY` ones on the sample) a comparison
#: method's own answer is finished when its screened error is within this share above the
#: answer in hand (the sample's ALS ranks seeds to a few percent: planted dense factors,
#: 100,000 x 500, r = 5: thresholded's ``V`` screened 4.3% above the core solve's and finished
#: 1.7% below it, on 1,000 sampled rows); on dense data always (one screened 20% above and
#: finished 0.9% below).
METHOD_SCREEN_MARGIN = 0.05
#: How far above its screened error (scaled to all rows) the core's answer may end on all of
#: ``A`` before a seed that screens to its screened ``V`` is finished after all
#: (:func:`shortlist`): the screening sample's 1,000-2,400 rows put the ratio between 0.65 and
#: 1.45 on small planted data (a review: 296 runs, 5 above 1.25, none of which a skipped seed
#: would have won), and the trial that lost to thresholded was at 1.41.
PROMISE_MARGIN = 0.25


@dataclass(frozen=True)
class Seed:
    """A start for the full data: ``V`` (``n x r``) and, when it covers every row, ``U``."""

    name: str
    V: np.ndarray
    U: np.ndarray | None = None


def uses_portfolio(
    method: str, model: Any, backend: Any, one_hot: Any, weights: Any, mask: Any
) -> bool:
    """The portfolio serves the default objective only: formulation 1 (``||A - UVᵀ||²``) on the
    default backend, with no constraint, weights or mask (other objectives are the caller's).

    >>> uses_portfolio("qubo", "formulation1", None, None, None, None)
    True
    >>> uses_portfolio("qubo", "formulation1", "neal", None, None, None)
    False
    """
    return (
        method == "qubo"
        and isinstance(model, str)
        and model == "formulation1"
        and backend is None
        and one_hot is None
        and not weights
        and mask is None
    )


def solved_by_seeds_only(core: np.ndarray, ones: int) -> bool:
    """Whether an unsampled ``core`` (all of ``A``, with ``ones`` ones) is solved by its own
    seeds only (see :data:`SEEDS_ONLY_CELLS`).

    >>> A = (np.add.outer(np.arange(60_000), np.arange(100)) % 10 == 0).astype(np.int8)
    >>> solved_by_seeds_only(A, int(A.sum()))  # 6 million entries, 10% ones
    True
    >>> A[:35_000] = 0
    >>> A[35_000:] |= np.add.outer(np.arange(25_000), np.arange(100)) % 5 == 0
    >>> float(A.mean()), solved_by_seeds_only(A, int(A.sum()))  # 20% ones on its support
    (0.08333333333333333, False)
    """
    m, n = core.shape
    if m * n <= SEEDS_ONLY_CELLS or ones > SEEDS_ONLY_DENSITY * m * n:
        return False  # the support holds no smaller share of ones
    support = int(np.count_nonzero(core.any(axis=1))) * int(np.count_nonzero(core.any(axis=0)))
    return ones <= SEEDS_ONLY_DENSITY * support


def portfolio_core_params(
    backend_params: dict[str, Any],
    shape: tuple[int, int],
    rank: int,
    *,
    sampled: bool,
    ones: int,
    seeds_only: bool = False,
) -> dict[str, Any]:
    """The native solver's parameters for the core solve of the portfolio: the caller's,
    plus the budget of a core that is one seed among several, unless the caller set the
    budget (``work_limit``, ``time_limit`` or ``num_reads``). An unsampled core (with ``ones``
    ones) that the comparison methods take whole beside their row samples
    (:func:`takes_whole_and_rows`) gets
    :data:`BOTH_CORE_WORK_SHARE` of the default budget. A sampled core is solved by its
    own seeds only (``num_reads=0``: no annealing restart) within a work budget sized from
    the core (:func:`~bmfdsl.solvers.native.sampled_core_work_limit`): the portfolio's
    seeds on the larger uniform sample beside it cover what the restarts found (on the 35
    sampled runs of bench_scale and bench_families, no restart changed the final error, and
    they took 0.2-1.5 s of a 0.5-4 s run). An unsampled core that
    :func:`solved_by_seeds_only` (``seeds_only``) also gets ``num_reads=0``, within that
    budget, unless the caller set a patience (then it anneals). Any other unsampled core
    stops its restarts once they stall for
    :func:`~bmfdsl.solvers.native.portfolio_work_patience` work units (counted, so the same
    seed gives the same answer), unless the caller set a patience.

    The core gets no flip descent (``flip_sweeps=0``, unless the caller set it): the pipeline
    runs it on the full data's answer instead (a core's answer improved by it was finished
    worse on all of ``A`` in 2 of 18 small real-data runs).

    >>> portfolio_core_params({"num_reads": 3}, (100, 1000), 5, sampled=True, ones=9_000)
    {'flip_sweeps': 0, 'num_reads': 3}
    >>> sorted(portfolio_core_params({}, (100, 1000), 5, sampled=True, ones=9_000).items())[1]
    ('num_reads', 0)
    >>> sorted(portfolio_core_params({}, (100, 17), 5, sampled=False, ones=500))
    ['flip_sweeps', 'work_patience']
    >>> sorted(portfolio_core_params({"patience": 5}, (100, 17), 5, sampled=False, ones=500))
    ['flip_sweeps', 'patience']
    >>> b = portfolio_core_params({"patience": 5}, (2_000, 200), 5, sampled=False, ones=90_000)
    >>> b["work_limit"]  # half the default budget: the methods take the core whole
    2000000000.0
    >>> portfolio_core_params({}, (20_000, 300), 5, sampled=False, ones=600_000, seeds_only=True)
    {'flip_sweeps': 0, 'num_reads': 0}
    >>> portfolio_core_params(
    ...     {"flip_sweeps": 1}, (20_000, 300), 5, sampled=False, ones=600_000, seeds_only=True
    ... )
    {'flip_sweeps': 1, 'num_reads': 0}
    """
    from bmfdsl.solvers.native import (
        auto_work_limit,
        portfolio_work_patience,
        sampled_core_work_limit,
    )

    params = {"flip_sweeps": 0, **backend_params}
    if any(name in params for name in ("work_limit", "time_limit", "num_reads")):
        return params
    if sampled:
        return {**params, "work_limit": sampled_core_work_limit(shape, rank), "num_reads": 0}
    if takes_whole_and_rows(shape, rank, sampled=False, ones=ones):  # the methods' two runs
        params["work_limit"] = BOTH_CORE_WORK_SHARE * auto_work_limit(shape)
    if any(name in params for name in ("patience", "work_patience")):
        return params
    if seeds_only:
        return {**params, "num_reads": 0}
    return {**params, "work_patience": portfolio_work_patience(shape, rank)}


def rows_for_methods(shape: tuple[int, int], rank: int, *, sampled: bool) -> int:
    """Rows of the core the comparison methods see (:data:`METHOD_CELLS`, a sampled core's
    :data:`SAMPLED_METHOD_CELLS`; at least ``rank``).

    >>> rows_for_methods((2_000, 200), 5, sampled=False)
    655
    >>> rows_for_methods((2_000, 200), 5, sampled=True)
    2000
    """
    return _rows_within(shape, rank, SAMPLED_METHOD_CELLS if sampled else METHOD_CELLS)


def _rows_within(shape: tuple[int, int], rank: int, cells: int) -> int:
    """Rows of a core of ``shape`` that fill ``cells`` entries (at least ``rank``, at most
    all of them)."""
    return int(min(shape[0], max(rank, cells // max(shape[1], 1))))


def method_cells(shape: tuple[int, int], ones: int) -> float:
    """The entries of a core of ``shape`` with ``ones`` ones as the comparison methods'
    products count them: all of them, or, on sparse data (at most
    :data:`~bmfdsl.solvers.methods.SPARSE_DENSITY` ones, where the products sum over the
    ones), ``1 / SPARSE_DENSITY`` per one, where the two ways cost about the same.

    >>> method_cells((6_000, 200), 600_000), method_cells((6_000, 200), 60_000)
    (1200000.0, 480000.0)
    """
    from bmfdsl.solvers.methods import SPARSE_DENSITY

    cells = float(shape[0] * shape[1])
    return cells if ones > SPARSE_DENSITY * cells else ones / SPARSE_DENSITY


def takes_whole_and_rows(shape: tuple[int, int], rank: int, *, sampled: bool, ones: int) -> bool:
    """Whether ``thresholded`` and ``penalized`` take an unsampled core of ``shape`` with
    ``ones`` ones whole beside their row sample (:data:`METHODS_BOTH_CELLS`, counted by
    :func:`method_cells`); the core solve then gets :data:`BOTH_CORE_WORK_SHARE` of its
    budget.

    >>> takes_whole_and_rows((2_000, 200), 5, sampled=False, ones=120_000)  # 655 rows of 2,000
    True
    >>> takes_whole_and_rows((600, 200), 5, sampled=False, ones=36_000)  # the row sample is all
    False
    >>> takes_whole_and_rows((6_000, 200), 5, sampled=False, ones=600_000)  # beyond 2**20 cells
    False
    >>> takes_whole_and_rows((6_000, 200), 5, sampled=False, ones=60_000)  # sparse: 480,000
    True
    """
    rows = rows_for_methods(shape, rank, sampled=sampled)
    return not sampled and rows < shape[0] and method_cells(shape, ones) <= METHODS_BOTH_CELLS


def wide_sample_rows(shape: tuple[int, int], rank: int, *, sampled: bool, ones: int) -> int:
    """Rows of the second row sample ``thresholded`` and ``penalized`` see on a core of
    ``shape`` with ``ones`` ones (:data:`WIDE_METHOD_CELLS` entries, at least ``rank`` rows):
    an unsampled core past :data:`METHODS_BOTH_CELLS` entries, as their products count them
    (:func:`method_cells`), up to :data:`FULL_POLISH_CELLS`; 0 where they take no second
    sample.

    >>> wide_sample_rows((10_000, 300), 10, sampled=False, ones=900_000)
    1747
    >>> wide_sample_rows((10_000, 300), 10, sampled=False, ones=90_000)  # sparse: taken whole
    0
    >>> wide_sample_rows((10_000, 300), 10, sampled=True, ones=900_000)
    0
    >>> wide_sample_rows((60_000, 300), 10, sampled=False, ones=5_400_000)  # past 2**24
    0
    """
    if shape[0] * shape[1] > FULL_POLISH_CELLS or not recombines(
        shape, rank, sampled=sampled, ones=ones
    ):
        return 0
    wide = _rows_within(shape, rank, WIDE_METHOD_CELLS)
    return wide if rows_for_methods(shape, rank, sampled=False) < wide < shape[0] else 0


def recombines(shape: tuple[int, int], rank: int, *, sampled: bool, ones: int) -> bool:
    """Whether the best answer's repair also tries the other starts' components
    (:func:`crossovers`) on a core of ``shape`` with ``ones`` ones: an unsampled core past
    :data:`METHODS_BOTH_CELLS` entries as the methods' products count them, where they see
    row samples only (see :data:`CROSSOVER_POSITIONS`).

    >>> recombines((10_000, 300), 10, sampled=False, ones=900_000)
    True
    >>> recombines((60_000, 300), 10, sampled=False, ones=5_400_000)  # past 2**24 too
    True
    >>> recombines((10_000, 300), 10, sampled=False, ones=90_000)  # sparse: taken whole
    False
    >>> recombines((10_000, 300), 10, sampled=True, ones=900_000)
    False
    """
    return (
        not sampled
        and rows_for_methods(shape, rank, sampled=False) < shape[0]
        and not takes_whole_and_rows(shape, rank, sampled=False, ones=ones)
    )


def structure_sample_rows(shape: tuple[int, int], rank: int) -> int:
    """Rows of the uniform sample the structure seeds see: 200 per factor, at least 1,000, so
    that a component spanning 1% of the rows shows in about 10 of them (all rows if fewer).

    >>> structure_sample_rows((200_000, 1000), 5), structure_sample_rows((500, 40), 10)
    (1000, 500)
    """
    return int(min(shape[0], max(1000, 200 * rank)))


@dataclass(frozen=True)
class SeedSet:
    """The portfolio's seeds and the uniform row sample they are screened on (``None``: the
    data is small enough to finish every seed on it); ``whole_and_rows``: whether
    ``thresholded`` and ``penalized`` took the core whole beside their row samples
    (:func:`takes_whole_and_rows`); ``wide_sample``: whether they also saw a second one
    (:func:`wide_sample_rows`); ``recombine``: whether the best answer's repair recombines
    (:func:`recombines`)."""

    seeds: list[Seed]
    sample: np.ndarray | None = None
    whole_and_rows: bool = False
    wide_sample: bool = False
    recombine: bool = False


def repair_start_count(shape: tuple[int, int], seed_set: SeedSet) -> int:
    """How many of the finished answers :func:`repair_seeds` starts from, on data of
    ``shape``: :data:`BOTH_REPAIR_STARTS` where the methods took the core whole beside their
    row samples (``seed_set.whole_and_rows``), :data:`WIDE_REPAIR_STARTS` where they also
    saw a second one (``seed_set.wide_sample``), :data:`LARGE_REPAIR_STARTS` past
    :data:`METHODS_BOTH_CELLS` entries otherwise, else :data:`REPAIR_STARTS`.

    >>> repair_start_count((100, 30), SeedSet([]))
    2
    >>> repair_start_count((2_000, 200), SeedSet([], whole_and_rows=True))
    3
    >>> repair_start_count((20_000, 200), SeedSet([]))
    4
    >>> repair_start_count((20_000, 200), SeedSet([], wide_sample=True))
    5
    """
    if seed_set.whole_and_rows:
        return BOTH_REPAIR_STARTS
    if seed_set.wide_sample:
        return WIDE_REPAIR_STARTS
    return LARGE_REPAIR_STARTS if shape[0] * shape[1] > METHODS_BOTH_CELLS else REPAIR_STARTS


def with_thresholded_whole(
    seed_set: SeedSet, core: np.ndarray, rank: int, method_rng: np.random.Generator
) -> SeedSet:
    """``seed_set`` with the seed ``"thresholded-whole"`` (``method="thresholded"`` on all of
    ``core``) last, so that it wins no earlier tie. Call it from the caller's thread after the
    other seeds' :meth:`SeedsAhead.result`: its NMF's products then use BLAS as the caller
    set it, as that method does, so it is that method's own answer, in its time.
    """
    whole = _method_answer("thresholded", core, rank, method_rng, "thresholded-whole", True)
    return replace(seed_set, seeds=[*seed_set.seeds, *whole])


class SeedsAhead:
    """The portfolio's seeds being computed in threads (:func:`start_portfolio_seeds`).

    BLAS runs on one thread from the start until :meth:`result` (or :meth:`close`): the seeds
    make hundreds of small products, where BLAS threads only wait on a busy machine. The
    setting is process-wide and only takes effect when made from the caller's thread (a
    worker thread's own setting left BLAS on all threads, at 20x the time), so it is made
    here; the caller's stages meanwhile make only exact integer products, whose answers no
    thread count changes.
    """

    def __init__(self, jobs: list[Callable[[], list[Seed]]], found: SeedSet):
        """``found``: the seed set the jobs' seeds go into (their order)."""
        from bmfdsl.solvers.native import one_blas_thread

        self._template = found
        self._found: SeedSet | None = None
        self._blas = contextlib.ExitStack()
        self._blas.enter_context(one_blas_thread())
        self._closer = weakref.finalize(self, self._blas.close)  # in case result never comes
        pool = ThreadPoolExecutor(max_workers=threads_for(len(jobs)))
        self._futures = [pool.submit(job) for job in jobs]
        pool.shutdown(wait=False)  # its threads end with their jobs
        close_with_call(self.close)  # when factorize ends, whatever happens

    def result(self) -> SeedSet:
        """The seeds, in the jobs' order (waits for them the first time; re-raises a job's
        error)."""
        if self._found is None:
            try:
                found = [seed for future in self._futures for seed in future.result()]
            finally:
                self.close()
            self._found = replace(self._template, seeds=found)
        return self._found

    @property
    def closed(self) -> bool:
        """Whether BLAS has its threads back (after :meth:`result` or :meth:`close`)."""
        return not self._closer.alive

    def close(self) -> None:
        """Give BLAS its threads back and cancel the seeds not started yet (those running
        go on to their end)."""
        for future in self._futures:
            future.cancel()
        self._closer()


def start_portfolio_seeds(
    data: BinaryMatrix,
    core: np.ndarray,
    rank: int,
    method_rng: np.random.Generator,
    *,
    sampled: bool,
) -> SeedsAhead:
    """Start computing the seeds beside the core solve (see the module docstring) in threads
    and return at once; :meth:`SeedsAhead.result` collects them. ``method_rng`` is the
    generator in the state the comparison methods would find it in (each gets a copy); it is
    not advanced. The pipeline adds ``"thresholded-whole"`` (:func:`with_thresholded_whole`)
    once the core's error is known.

    The seeds are independent (each draws from its own generator, drawn here in the
    caller's thread) and spend their time in BLAS and nogil numba kernels, so threads overlap
    them with each other and with what the caller does meanwhile (the pipeline: the core
    solve); the answers are the same as one after the other. A 100 x 1,000 core at rank 5:
    thresholded, penalized and the structure seeds take 0.08, 0.12 and 0.12 s one after the
    other.
    """
    rows = rows_for_methods(core.shape, rank, sampled=sampled)
    own = np.random.default_rng(copy.deepcopy(method_rng).integers(2**63 - 1))
    if sampled or rows == core.shape[0]:
        method_rows = np.arange(rows)  # a sampled core is random already: its first rows
    else:
        method_rows = np.sort(own.choice(core.shape[0], size=rows, replace=False))
    method_core = np.ascontiguousarray(core[method_rows])
    covers_all = not sampled and rows == core.shape[0]
    m, n = data.shape
    sample = None
    if sampled:
        size = structure_sample_rows(data.shape, rank)
        picked = np.arange(m) if size >= m else np.sort(own.choice(m, size=size, replace=False))
        sample = np.ascontiguousarray(data.take_rows(picked), dtype=np.int8)

    takes_whole = {
        "baseline": not sampled and core.size <= BASELINE_WHOLE_CELLS,
        **dict.fromkeys(
            ("thresholded", "penalized"),
            takes_whole_and_rows(core.shape, rank, sampled=sampled, ones=data.total),
        ),
    }

    def method_seed(name: str, whole: bool, label: str) -> Callable[[], list[Seed]]:
        taken = core if whole else method_core
        return partial(_method_answer, name, taken, rank, method_rng, label, covers_all or whole)

    jobs = [method_seed(name, takes_whole.get(name, False), name) for name in SEED_METHODS]
    jobs += [  # their row sample's answers too: other starts
        method_seed(name, False, f"{name}-rows")
        for name in ("thresholded", "penalized")
        if takes_whole[name]
    ]
    wide = wide_sample_rows(core.shape, rank, sampled=sampled, ones=data.total)
    if wide:
        wide_core = np.ascontiguousarray(
            core[np.sort(own.choice(core.shape[0], size=wide, replace=False))]
        )
        jobs += [
            partial(_method_answer, name, wide_core, rank, method_rng, f"{name}-wide", False)
            for name in ("thresholded", "penalized")
        ]
    if sample is not None and rank <= min(sample.shape):
        jobs.append(partial(_structure_seeds, sample, rank, own))
    return SeedsAhead(
        jobs,
        SeedSet(
            [],
            sample if sampled and m * n > FULL_POLISH_CELLS else None,
            whole_and_rows=takes_whole["thresholded"],
            wide_sample=wide > 0,
            recombine=recombines(core.shape, rank, sampled=sampled, ones=data.total),
        ),
    )


def takes_thresholded_whole(
    shape: tuple[int, int], ones: int, core_error: int, *, sampled: bool
) -> bool:
    """Whether the portfolio adds ``thresholded`` on the whole core (see
    :data:`THRESHOLDED_WHOLE_CELLS`): an unsampled core that the comparison methods otherwise
    see only a row sample of, where the core solve's answer (error ``core_error``; ``A`` has
    ``ones`` ones) leaves most of ``A`` unexplained
    (:data:`THRESHOLDED_WHOLE_MIN_ERROR_SHARE`).

    >>> takes_thresholded_whole((5000, 1000), 2_500_000, 2_300_000, sampled=False)
    True
    >>> takes_thresholded_whole((5000, 1000), 500_000, 100_000, sampled=False)  # structure
    False
    >>> takes_thresholded_whole((100, 1000), 50_000, 46_000, sampled=False)  # methods see all
    False
    >>> takes_thresholded_whole((5000, 1000), 100_000, 95_000, sampled=False)  # taken whole
    False
    >>> takes_thresholded_whole((5000, 1000), 2_500_000, 2_300_000, sampled=True)
    False
    """
    cells = shape[0] * shape[1]
    constant_error = min(ones, cells - ones)  # all zeros, or one all-ones component
    return (
        not sampled
        and method_cells(shape, ones) > METHODS_BOTH_CELLS  # else thresholded took it whole
        and cells <= THRESHOLDED_WHOLE_CELLS
        and core_error >= THRESHOLDED_WHOLE_MIN_ERROR_SHARE * constant_error
    )


def threads_for(jobs: int) -> int:
    """Threads for ``jobs`` independent jobs (seeds; batches of starts finished side by side):
    one per job, at most one per CPU the process may run on.

    >>> threads_for(1)
    1
    """
    return max(1, min(jobs, default_threads()))


def shortlist(
    seed_set: SeedSet,
    answer_V: np.ndarray,
    keep: int = SHORTLIST,
    *,
    answer_on_all: tuple[np.ndarray, int, int] | None = None,
) -> list[Seed]:
    """The seeds worth finishing on the full data, in order (see the module docstring): all
    but repeats when the data is small; on large data, best screened first (first on ties),
    against the core solve's answer screened the same way (``answer_V``: its ``V`` as the
    solve returned it, so the shortlist does not wait for the core's finish on the full data):
    every comparison method's own answer (on a sparse sample: within
    :data:`METHOD_SCREEN_MARGIN` of it), and at most ``keep`` other seeds that beat it.

    A seed that starts where the core's answer did is skipped (it would end the same), and so
    is one that screens to the ``V`` the answer ended at on all of ``A`` or to the answer's
    screened ``V`` (its columns in any order: it likely ends where the answer did). The
    latter not where the answer ended on all of ``A`` far above what its screening promised
    (by more than :data:`PROMISE_MARGIN` over its screened error scaled to all rows): then its
    own start took it elsewhere than the sample did, and a seed from another start may end
    better (in a trial with the screening moved down to 2**21 entries, planted blocks,
    15,052 x 400, r = 10: thresholded's own answer screened to the core's ``V``, 3,022 on
    2,000 rows, and ended at 24,365 on all of ``A``, the core's answer at 32,078: 41% above its
    promise). ``answer_on_all``: the answer's ``V`` and error on all of ``A`` and ``A``'s rows,
    when it is finished first and polished by ALS (``None``: the screened ``V`` alone).

    >>> A = np.kron(np.eye(2, dtype=np.int8), np.ones((3, 2), dtype=np.int8))
    >>> good = Seed("good", np.kron(np.eye(2, dtype=np.int8), np.ones((2, 1), dtype=np.int8)))
    >>> bad = Seed("bad", np.zeros((4, 2), dtype=np.int8))
    >>> [seed.name for seed in shortlist(SeedSet([bad, good], A), bad.V)]
    ['good']
    >>> shortlist(SeedSet([bad, good], A), good.V)
    []
    >>> [seed.name for seed in shortlist(SeedSet([good, Seed("again", good.V)]), bad.V)]
    ['good']
    """
    from bmfdsl.solvers.native import one_blas_thread

    twins = repeats(seed_set.seeds)
    seeds = [seed for seed, twin in zip(seed_set.seeds, twins, strict=True) if twin is None]
    sample = seed_set.sample
    if sample is None:
        return seeds
    # the core's answer is finished from answer_V by the same BLS and ALS: the same start ends
    # the same (baseline's V was the core's on sparse planted blocks, 450,000 x 40, r = 5)
    core = Seed("core", np.asarray(answer_V, dtype=np.int8))
    twins = repeats([core, *seeds])[1:]
    seeds = [seed for seed, twin in zip(seeds, twins, strict=True) if twin != core.name]

    matrix = _screening_matrix(sample)
    dense = not isinstance(matrix, SparseMatrix)  # over SCREEN_SPARSE_DENSITY ones
    with one_blas_thread():  # the answer and every seed in one batch (its ALS side by side)
        answers = _screened_answers(
            matrix, [answer_V, *(seed.V for seed in seeds)], threads_for(len(seeds) + 1)
        )
    (to_beat, answer_key), *judged = [(error, _column_set(V)) for error, _, V in answers]
    ranked = sorted(range(len(seeds)), key=lambda index: (judged[index][0], index))
    seen = {answer_key}
    if answer_on_all is not None:
        end_V, end_error, rows = answer_on_all
        seen = {_column_set(np.asarray(end_V, dtype=np.int8))}
        if end_error * sample.shape[0] <= to_beat * (1 + PROMISE_MARGIN) * rows:  # kept
            seen.add(answer_key)
    chosen: list[Seed] = []
    others = 0  # seeds kept that are not a comparison method's own answer
    for index in ranked:
        (error, key), seed = judged[index], seeds[index]
        own_answer = seed.name in SEED_METHODS
        # On dense data the sample ranks starts only roughly, so a method's own answer is
        # finished whatever it screens to: from its own start the full data can end elsewhere
        # (22 below the core's answer on dense planted blocks, 60,000 x 800, r = 10, where
        # both screened to the same V; 1.3% below it where it screened 7.4% above). On sparse
        # data the sample tells: finishing them there doubled 5·10⁶ rows' passes, and no
        # answer changed.
        forced = own_answer and dense
        within = own_answer and error <= to_beat * (1 + METHOD_SCREEN_MARGIN)
        if not forced and (key in seen or not (error < to_beat or within)):
            continue
        if not own_answer and others == keep:
            continue
        seen.add(key)
        chosen.append(seed)
        others += not own_answer
    return chosen


def repair_seed(
    sample: np.ndarray,
    answer_V: np.ndarray,
    rounds: int = REPAIR_ROUNDS,
    *,
    deadline: float | None = None,
    ranked_on: np.ndarray | None = None,
) -> Seed | None:
    """A start that swaps one of the answer's components for a block of ones it leaves
    uncovered, when that lowers the ALS error on ``sample`` (dense rows of ``A``); ``None``
    when no swap does.

    The block: the column with the most uncovered ones (ones of ``A`` where ``U Vᵀ`` is 0),
    its uncovered rows, and every column uncovered in at least half of those rows (ASSO's
    association rule on the residual). Each of the ``r`` components is tried in its place
    (BLS and ALS on ``sample``), the best swap is kept, for up to ``rounds`` rounds. It finds
    a small planted block that every seed merged or missed (planted blocks of 2 to 8 columns,
    1,000,000 x 500, r = 10: 828,139 -> 733,557). ``ranked_on`` (fewer rows of ``A``, from
    :func:`ranking_rows`): the swaps and the answer are judged there first, and only the best
    :data:`REPAIR_CONFIRMED` swaps that beat the answer there (or tie it with other factors)
    on ``sample``; with none, the repair ends. Deterministic: no random choice; an opt-in
    ``deadline`` (a ``time.perf_counter()`` value, from ``time_limit``) stops it between swaps.

    >>> A = np.kron(np.eye(3, dtype=np.int8), np.ones((4, 3), dtype=np.int8))
    >>> merged = np.array([[1, 1], [1, 1], [1, 1], [1, 0], [1, 0], [1, 0], [0, 0], [0, 0], [0, 0]])
    >>> seed = repair_seed(A, merged.astype(np.int8))
    >>> seed.name, sorted(seed.V.sum(axis=0).tolist())
    ('repair', [3, 3])
    """
    (repair,) = repair_seeds(sample, [answer_V], rounds, deadline=deadline, ranked_on=ranked_on)
    return repair


def repair_seeds(
    sample: np.ndarray,
    answers_V: list[np.ndarray],
    rounds: int = REPAIR_ROUNDS,
    *,
    deadline: float | None = None,
    ranked_on: np.ndarray | None = None,
    crossover: bool = False,
) -> list[Seed | None]:
    """:func:`repair_seed` of each answer in ``answers_V`` (best first, as
    :func:`best_distinct` gives them), named ``"repair"``, ``"repair-2"``, ...: a later
    answer's repair only where it also ends below the first answer on ``sample`` (else it
    would likely not beat it on all of ``A`` either). ``None`` where an answer has none.
    ``crossover``: the first answer's rounds also try the other answers' components
    (:func:`crossovers`).

    >>> A = np.kron(np.eye(3, dtype=np.int8), np.ones((4, 3), dtype=np.int8))
    >>> merged = np.array([[1, 1], [1, 1], [1, 1], [1, 0], [1, 0], [1, 0], [0, 0], [0, 0], [0, 0]])
    >>> [seed and seed.name for seed in repair_seeds(A, [merged.astype(np.int8)] * 2)]
    ['repair', 'repair-2']
    """
    from bmfdsl.solvers.native import one_blas_thread

    matrix = _screening_matrix(sample)  # wrapped once for every batch below
    ranking = None if ranked_on is None else _screening_matrix(ranked_on)
    repairs: list[Seed | None] = []
    to_beat = None
    pool = _distinct_columns(answers_V) if crossover else None
    pool_rows = None
    if crossover and answers_V:
        size = structure_sample_rows(sample.shape, answers_V[0].shape[1])
        if 2 * size <= sample.shape[0]:
            picked = _evenly_spaced(sample.shape[0], size)
            pool_rows = _screening_matrix(np.ascontiguousarray(sample[picked]))
    with one_blas_thread():
        for index, answer_V in enumerate(answers_V):
            if index and deadline is not None and time.perf_counter() > deadline:
                repairs.append(None)  # past an opt-in deadline: the best answer's repair only
                continue
            start, (error, _, V) = _repaired(
                sample,
                matrix,
                ranking,
                answer_V,
                rounds,
                deadline,
                pool if index == 0 else None,
                pool_rows,
            )
            to_beat = start if to_beat is None else to_beat
            name = "repair" if index == 0 else f"repair-{index + 1}"
            helps = error < to_beat and error < start
            repairs.append(Seed(name, np.ascontiguousarray(V, dtype=np.int8)) if helps else None)
    return repairs


def _repaired(
    sample: np.ndarray,
    matrix: BinaryMatrix,
    ranking: BinaryMatrix | None,
    answer_V: np.ndarray,
    rounds: int,
    deadline: float | None,
    pool: list[np.ndarray] | None = None,
    pool_rows: BinaryMatrix | None = None,
) -> tuple[int, tuple[int, np.ndarray, np.ndarray]]:
    """The answer's screened error and the best screened answer its swaps reached (itself
    when none helps): :func:`repair_seed`'s rounds, BLAS already on one thread; with
    ``pool`` (columns), its :func:`crossovers` too."""
    best = _screened_answer(matrix, answer_V)
    start = best[0]
    for _ in range(rounds):
        block = _uncovered_block(sample, best[1], best[2])
        if block is None:
            break
        round_best = best
        swaps = _swaps(best[2], block)
        if pool is not None:
            swaps += _best_recombined(
                pool_rows, crossovers(sample, best[1], best[2], pool), deadline
            )
        if ranking is not None and len(swaps) > REPAIR_CONFIRMED:
            # the answer judged with its swaps: only a swap that beats it there is
            # confirmed (see REPAIR_CONFIRMED)
            judged = list(
                _screened_many(ranking, [best[2], *swaps], deadline, threads_for(len(swaps) + 1))
            )
            if not judged:  # past a deadline
                break
            (to_beat, _, judged_V), *ranked = judged
            answer_key = _column_set(judged_V)
            swaps = [
                swaps[k]
                for k in _lowest(ranked, REPAIR_CONFIRMED)
                # a tie with other factors too: a block the ranking rows miss can tie
                if ranked[k][0] < to_beat
                or (ranked[k][0] == to_beat and _column_set(ranked[k][2]) != answer_key)
            ]
            if not swaps:  # none beats the answer: no round can
                break
        for tried in _screened_many(matrix, swaps, deadline, threads_for(len(swaps))):
            if tried[0] < round_best[0]:
                round_best = tried
        if round_best[0] >= best[0]:
            break
        best = round_best
    return start, best


def best_distinct(
    answers: list[tuple[int, np.ndarray]], count: int, *, also: np.ndarray | None = None
) -> list[np.ndarray]:
    """The ``V`` of the ``count`` lowest-error answers ``(error, V)`` (the first on ties), one
    per set of columns (:func:`lowest_distinct`: an answer whose ``V`` is an earlier one's up
    to column order is skipped, its repair would be the same). ``also``: one more ``V``, added
    last unless its columns are among them (the pipeline's: ``baseline``'s answer, see
    :data:`REPAIR_ALSO`).

    >>> V = np.array([[1, 0], [1, 1]], dtype=np.int8)
    >>> zeros = np.zeros((2, 2), dtype=np.int8)
    >>> [v.tolist() for v in best_distinct([(3, V), (3, V[:, ::-1]), (4, zeros)], 2)]
    [[[1, 0], [1, 1]], [[0, 0], [0, 0]]]
    >>> len(best_distinct([(3, V)], 1, also=zeros)), len(best_distinct([(3, V)], 1, also=V))
    (2, 1)
    """
    chosen = [np.asarray(answers[k][1], dtype=np.int8) for k in lowest_distinct(answers, count)]
    if also is not None:
        also = np.asarray(also, dtype=np.int8)
        if _column_set(also) not in {_column_set(V) for V in chosen}:
            chosen.append(also)
    return chosen


def lowest_distinct(answers: list[tuple[int, np.ndarray]], count: int) -> list[int]:
    """Indices of the ``count`` lowest-error answers ``(error, V)``, lowest first (the first
    on ties), one per set of columns: an answer whose ``V`` is an earlier one's up to column
    order is skipped.

    >>> V = np.array([[1, 0], [1, 1]], dtype=np.int8)
    >>> lowest_distinct([(5, V), (3, V[:, ::-1]), (4, V), (4, 1 - V)], 3)
    [1, 3]
    """
    picked: list[int] = []
    seen: set[bytes] = set()
    for index in sorted(range(len(answers)), key=lambda k: (answers[k][0], k)):
        key = _column_set(np.asarray(answers[index][1], dtype=np.int8))
        if key not in seen and len(picked) < count:
            seen.add(key)
            picked.append(index)
    return picked


def screening_rows(data: BinaryMatrix, seed_set: SeedSet, rank: int) -> np.ndarray:
    """The rows the portfolio judges a start on: its screening sample; all of ``A`` up to
    :data:`FULL_POLISH_CELLS` entries; else :func:`structure_sample_rows` evenly spaced rows.

    >>> from bmfdsl.linalg import as_matrix
    >>> screening_rows(as_matrix(np.eye(3, dtype=np.int8)), SeedSet([]), 1).shape
    (3, 3)
    """
    if seed_set.sample is not None:
        return seed_set.sample
    m, n = data.shape
    if m * n <= FULL_POLISH_CELLS:
        return data.dense()
    return _evenly_spaced_rows(data, structure_sample_rows(data.shape, rank))


def ranking_rows(data: BinaryMatrix, seed_set: SeedSet, rank: int) -> np.ndarray | None:
    """The rows that rank the repair's swaps before the best are judged on
    :func:`screening_rows`: :func:`structure_sample_rows` evenly spaced rows where those are
    all of ``A``, it has more than :data:`REPAIR_RANK_CELLS` entries and at least twice as
    many rows, else ``None`` (every swap is judged there).

    >>> from bmfdsl.linalg import as_matrix
    >>> ranking_rows(as_matrix(np.ones((5000, 100), dtype=np.int8)), SeedSet([]), 2) is None
    True
    >>> ranking_rows(as_matrix(np.ones((30000, 100), dtype=np.int8)), SeedSet([]), 2).shape
    (1000, 100)
    """
    m, n = data.shape
    if seed_set.sample is not None or not REPAIR_RANK_CELLS < m * n <= FULL_POLISH_CELLS:
        return None
    size = structure_sample_rows(data.shape, rank)
    return None if 2 * size > m else _evenly_spaced_rows(data, size)  # else it saves little


def _evenly_spaced_rows(data: BinaryMatrix, size: int) -> np.ndarray:
    """``size`` rows of ``A`` evenly spaced from the first to the last, dense."""
    return np.ascontiguousarray(data.take_rows(_evenly_spaced(data.shape[0], size)))


def _evenly_spaced(m: int, size: int) -> np.ndarray:
    """``size`` indices of ``m`` rows evenly spaced from the first to the last."""
    return np.linspace(0, m - 1, size).astype(np.int64)


def crossovers(
    sample: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    pool: list[np.ndarray],
    positions: int = CROSSOVER_POSITIONS,
) -> list[np.ndarray]:
    """``V`` with each column of ``pool`` it lacks in place of each of its ``positions``
    weakest components: those whose dropping from ``U Vᵀ`` raises the error on ``sample``
    (rows of ``A``, ``U`` their factor) the least (see :data:`CROSSOVER_POSITIONS`).

    >>> A = np.kron(np.eye(3, dtype=np.int8), np.ones((4, 3), dtype=np.int8))
    >>> U = np.repeat(np.eye(3, dtype=np.int8), 4, axis=0)[:, :2]
    >>> V = np.array([[1, 0]] * 3 + [[0, 1]] * 2 + [[0, 0]] * 4, dtype=np.int8)  # a weak 2nd
    >>> other = np.repeat(np.eye(3, dtype=np.int8), 3, axis=0)[:, 1]
    >>> [W[:, 1].tolist() for W in crossovers(A, U, V, [V[:, 0], other], positions=1)]
    [[0, 0, 0, 1, 1, 1, 0, 0, 0]]
    """
    costs = [_drop_cost(sample, U[:, k], V[:, k], U, V) for k in range(V.shape[1])]
    own = {_column_key(V[:, k]) for k in range(V.shape[1])}
    foreign = [column for column in pool if _column_key(column) not in own]
    swaps = []
    for k in np.argsort(costs, kind="stable")[:positions]:
        for column in foreign:
            swapped = V.copy()
            swapped[:, k] = column
            swaps.append(swapped)
    return swaps


def _best_recombined(
    rows: BinaryMatrix | None, Vs: list[np.ndarray], deadline: float | None
) -> list[np.ndarray]:
    """The :data:`CROSSOVER_KEPT` of ``Vs`` that end lowest after BLS and ALS on ``rows``
    (the first on ties), in their order; all of them without ``rows``."""
    if rows is None or len(Vs) <= CROSSOVER_KEPT:
        return Vs
    judged = list(_screened_many(rows, Vs, deadline, threads_for(len(Vs))))
    return [Vs[k] for k in _lowest(judged, CROSSOVER_KEPT)]


def _lowest(judged: list[tuple[int, np.ndarray, np.ndarray]], count: int) -> list[int]:
    """Indices of the ``count`` lowest errors in ``judged`` (the first on ties), in order."""
    order = sorted(range(len(judged)), key=lambda k: (judged[k][0], k))
    return sorted(order[:count])


def _drop_cost(
    sample: np.ndarray, u: np.ndarray, v: np.ndarray, U: np.ndarray, V: np.ndarray
) -> int:
    """How much the error of ``U Vᵀ`` on ``sample`` rises without the component ``u vᵀ``:
    each of its entries moves from ``p`` to ``p - 1``, adding ``2 (a - p) + 1``."""
    rows, columns = np.flatnonzero(u), np.flatnonzero(v)
    block = sample[np.ix_(rows, columns)].astype(np.int16)  # products count at most r ones
    products = U[rows].astype(np.int16) @ V[columns].astype(np.int16).T
    return int((2 * (block - products) + 1).sum(dtype=np.int64))


def _distinct_columns(answers_V: list[np.ndarray]) -> list[np.ndarray]:
    """The answers' columns, each once (first seen first), all-zero ones left out."""
    seen: set[bytes] = set()
    columns = []
    for V in answers_V:
        for k in range(V.shape[1]):
            column = np.ascontiguousarray(V[:, k], dtype=np.int8)
            if column.any() and _column_key(column) not in seen:
                seen.add(_column_key(column))
                columns.append(column)
    return columns


def _column_key(column: np.ndarray) -> bytes:
    """A column as a set key (its int8 bytes)."""
    return np.ascontiguousarray(column, dtype=np.int8).tobytes()


def _swaps(V: np.ndarray, block: np.ndarray) -> list[np.ndarray]:
    """``V`` with each column in turn replaced by ``block``."""
    swaps = []
    for k in range(V.shape[1]):
        swapped = V.copy()
        swapped[:, k] = block
        swaps.append(swapped)
    return swaps


def _screened_many(
    sample: np.ndarray | BinaryMatrix,
    swaps: list[np.ndarray],
    deadline: float | None,
    threads: int = 1,
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """:func:`_screened_answer` of each of ``swaps``: all in one batch (its ALS split over
    ``threads``), or under a ``deadline`` one at a time while it holds."""
    if deadline is None:
        yield from _screened_answers(sample, swaps, threads)
        return
    for swapped in swaps:
        if time.perf_counter() > deadline:
            return
        yield _screened_answer(sample, swapped)


def _screened_answer(
    sample: np.ndarray | BinaryMatrix, V: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray]:
    """How a start is judged on ``sample`` (rows of ``A``, or them wrapped by
    :func:`_screening_matrix`): BLS for ``U`` from ``V``, then ALS; the error and the
    polished ``U`` and ``V``."""
    return _screened_answers(sample, [V])[0]


def _screened_answers(
    sample: np.ndarray | BinaryMatrix, Vs: list[np.ndarray], threads: int = 1
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """:func:`_screened_answer` of each of ``Vs`` (one rank), in one batch: one pass over
    ``sample`` per half-step for all of them (the ALS in up to ``threads`` batches side by
    side), and each ends exactly as it would alone
    (:func:`~bmfdsl.solvers.solve_bls_many`, :func:`~bmfdsl.solvers.als_batch`)."""
    from bmfdsl.solvers import ALSStart, als_batch, solve_bls_many

    matrix = _screening_matrix(sample) if isinstance(sample, np.ndarray) else sample
    solved = solve_bls_many(matrix, Vs)
    starts = [ALSStart(U, V, error=error) for (U, error, _), V in zip(solved, Vs, strict=True)]
    return [
        (
            int(polished.error),
            np.asarray(polished.U, dtype=np.int8),
            np.asarray(polished.V, dtype=np.int8),
        )
        for polished in als_batch(matrix, starts, threads=threads)
    ]


def _screening_matrix(sample: np.ndarray) -> BinaryMatrix:
    """``sample`` wrapped once for a batch of BLS and ALS: as a CSR pattern when at most
    :data:`SCREEN_SPARSE_DENSITY` of it is ones (each pass then costs ``O(ones r)``, not a
    float copy and product of all ``m n`` entries), else in memory. The statistics are exact
    integers either way, so the answers are the same.

    >>> type(_screening_matrix(np.eye(9, dtype=np.int8))).__name__
    'SparseMatrix'
    """
    from bmfdsl.linalg import as_matrix

    if np.count_nonzero(sample) <= SCREEN_SPARSE_DENSITY * sample.size:
        return SparseMatrix.from_dense(sample)
    return as_matrix(sample)


def _uncovered_block(sample: np.ndarray, U: np.ndarray, V: np.ndarray) -> np.ndarray | None:
    """The block of ones that ``U Vᵀ`` leaves uncovered on ``sample``, as a column of ``V``
    (see :func:`repair_seed`); ``None`` when every one is covered."""
    counts, _ = uncovered_ones(sample, U, V)
    if counts.max(initial=0) == 0:
        return None
    in_rows, rows = uncovered_ones(sample, U, V, column=int(np.argmax(counts)))
    return (2 * in_rows >= rows).astype(np.int8)


def _method_answer(
    name: str,
    rows: np.ndarray,
    rank: int,
    method_rng: np.random.Generator,
    label: str,
    covers_all: bool,
) -> list[Seed]:
    """The seed ``label``: comparison method ``name`` on ``rows`` (all of the core's or a
    sample of them) from a copy of ``method_rng``; its ``U`` too where ``covers_all``."""
    from bmfdsl.solvers.methods import get_method

    U, V = get_method(name)(rows, rank, random_state=copy.deepcopy(method_rng))
    full_U = np.asarray(U, dtype=np.int8) if covers_all else None
    return [Seed(label, np.asarray(V, dtype=np.int8), full_U)]


def repeats(seeds: list[Seed]) -> list[str | None]:
    """For each seed, the name of an earlier one with the very same start (``U`` and ``V``;
    the finish is deterministic, so it would end the same), or ``None``.

    >>> V = np.eye(3, 2, dtype=np.int8)
    >>> repeats([Seed("a", V), Seed("b", V.copy()), Seed("c", V[:, ::-1])])
    [None, 'a', None]
    """
    first: dict[bytes, str] = {}
    found = []
    for seed in seeds:
        key = seed.V.tobytes() + (b"" if seed.U is None else b"U" + seed.U.tobytes())
        found.append(first.get(key))
        first.setdefault(key, seed.name)
    return found


def _column_set(V: np.ndarray) -> bytes:
    """``V``'s columns as a key that ignores their order."""
    return b"".join(sorted(np.ascontiguousarray(column).tobytes() for column in V.T))


def _structure_seeds(sample: np.ndarray, rank: int, rng: np.random.Generator) -> list[Seed]:
    """The native solver's structure seeds on a uniform row sample: their ``V``."""
    from bmfdsl.solvers.native import SEED_NAMES, structure_seeds

    pairs = structure_seeds(sample, rank, rng)
    return [Seed(name, V) for name, (_, V) in zip(SEED_NAMES, pairs, strict=True)]
