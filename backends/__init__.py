"""Solver backends, looked up by name through :mod:`bmfdsl.backends.registry`.

Importing this package imports no solver library: each adapter module is loaded on first
use by :func:`bmfdsl.backends.registry.get_backend`.
"""
