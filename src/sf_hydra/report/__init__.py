"""Sweep reports: `python -m sf_hydra.report <sweep dir>` plots learning curves (mean +- std
over seeds for each config) from the runs' TensorBoard files and prints their final scores."""

from sf_hydra.report.curves import Curve, mean_std, read_curve
from sf_hydra.report.runs import Run, find_runs, group_runs

__all__ = ["Curve", "Run", "find_runs", "group_runs", "mean_std", "read_curve"]
