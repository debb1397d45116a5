"""Batch runs: one tool over a dataset of cases, expectations checked, results compared; replaying recorded runs.

dataset.py reads the cases, runner.py runs them with bounded concurrency into a results file
(checking the expectations compiled by engine/link/expect.py), judge.py asks a model to grade
an output, progress.py shows how far it got, report.py summarises one results file and compares
two, recording.py and reuse.py keep a batch's model answers in the run store, and replay.py
runs a recorded run again with its recorded model answers.
"""
