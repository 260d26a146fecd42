"""Binary matrices and their exact integer arithmetic: the data layer under everything else.

* one interface over in-memory, scipy sparse and dask matrices (the :class:`BinaryMatrix`
  protocol, :func:`as_matrix`, :class:`InMemoryMatrix`, :class:`SparseMatrix`,
  :class:`DaskMatrix`, :class:`Orientation`);
* the numba kernels behind exact binary least squares and ALS (:func:`solve_rows_exact`,
  :func:`als_loop`, :func:`code_table`, :func:`best_codes_from_stats`, Gram and cross
  products), the exact row solver beyond enumeration (:func:`solve_rows_bounded`, branch and
  bound) and its local-search fallback (:func:`solve_rows_local`);
* where full-data BLS and ALS score codes: :data:`DEVICES`, :func:`check_device`,
  :func:`get_array_module` (numpy, or CuPy on a GPU, loaded only when asked for);
* how good an answer is: :func:`squared_error` and the paper's :func:`relative_error`;
* the products of the BMF family (integer sum, Boolean OR, GF(2) XOR): :func:`factor_product`,
  :func:`product_squared_error`.

Imports only the shared leaves (``errors``, ``validation``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.linalg._device import (
        ARRAY_DEVICES,
        DEVICES,
        check_device,
        exact_float32_products,
        first_minimum,
        get_array_module,
        to_host,
    )
    from bmfdsl.linalg._kernels import (
        BRANCH_CODES_PER_RANK,
        LOCAL_MOVES_PER_RANK,
        MAX_BRANCH_RANK,
        MAX_STATS_RANK,
        als_loop,
        best_codes_from_stats,
        bit_cross,
        bit_gram,
        bit_products,
        code_table,
        column_bits,
        default_threads,
        deflated_shift,
        dense_cross,
        dense_pattern,
        dense_quadratic_forms,
        dense_row_pairs,
        gram,
        integer_statistics,
        kernel_threads,
        pack_row_bits,
        pattern_column_counts,
        pattern_cross_into,
        pattern_gram_matvec,
        pattern_quadratic_forms,
        random_factor,
        row_bits,
        solve_rows_bounded,
        solve_rows_exact,
        solve_rows_local,
        start_kernels,
        symmetric_matvec,
        uncovered_ones,
    )
    from bmfdsl.linalg._matrix import (
        BinaryMatrix,
        DaskMatrix,
        DistinctColumns,
        InMemoryMatrix,
        Orientation,
        SparseMatrix,
        as_matrix,
        bit_gram_work,
        dense_gram,
        distinct_column_product,
        exact_gram,
        is_dask_array,
        weighted_squared_error,
    )
    from bmfdsl.linalg._products import (
        PRODUCTS,
        Product,
        apply_product,
        check_product,
        factor_product,
        product_squared_error,
    )
    from bmfdsl.linalg._scoring import relative_error, squared_error

__getattr__, __dir__, __all__ = lazy_exports(globals())
