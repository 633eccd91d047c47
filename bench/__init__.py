"""Tidemark's benchmarks: ``python -m bench.run NAME`` measures and records one in RESULTS.md.

Run from the repository root (``make bench`` runs them all). Each benchmark
is a module ``NAME_bench.py`` returning its figures and targets as values, a
template ``templates/NAME.md`` holding the prose of its RESULTS.md section,
and an entry in :mod:`bench.registry`, which says how to add one;
:mod:`bench.results` is the one writer of RESULTS.md.
"""
