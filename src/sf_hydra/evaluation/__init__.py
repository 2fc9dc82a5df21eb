"""Evaluation during training (issue #35): episodes played on a schedule with the weights the learner just
trained, in a process of its own (process.py), started and read by a Lightning callback (callback.py); the
episode-playing code is enjoy.py's (episodes.py). This package's __init__ imports nothing: enjoy.py and the
evaluation process import episodes.py without Lightning."""
