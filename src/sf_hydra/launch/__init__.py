"""Running training under a launcher: which signals stop a run and what follows once its
checkpoint is saved (`signals`), and the Slurm launcher that requeues preempted or
timed-out runs (`requeue`, used by `hydra/launcher=slurm`)."""
