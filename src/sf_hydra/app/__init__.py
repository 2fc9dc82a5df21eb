"""The launch: the command lines (train, enjoy, their checks, bad input and help), resuming a run folder,
the Lightning Trainer's parts and loggers, data-parallel ranks, Slurm requeueing and the Sample Factory
layer (its flags, their translation, importing its runs). Nothing below imports from here."""
