"""Solver backends, looked up by name through :mod:`bmfdsl.solvers._registry`.

Importing this package imports no solver library: each adapter module is loaded on first
use by :func:`bmfdsl.solvers.get_backend`.
"""
