"""Batch runs: one tool over a dataset of cases, expectations checked, results compared.

dataset.py reads the cases, expect.py compiles and checks expectations, runner.py runs the
cases with bounded concurrency into a results file, progress.py shows how far it got,
report.py summarises one results file and compares two.
"""
