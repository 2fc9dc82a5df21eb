"""The launcher of `hydra/launcher=slurm` (conf/hydra/launcher/slurm.yaml)."""

from sf_hydra.app.requeue import RequeueAfterCheckpoint

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as SubmititSlurmLauncher
except ImportError:  # no `slurm` extra: no Slurm launcher (and no plugin warning at every start)
    SubmititSlurmLauncher = None

if SubmititSlurmLauncher is not None:

    class SlurmLauncher(RequeueAfterCheckpoint, SubmititSlurmLauncher):
        """hydra-submitit-launcher's Slurm launcher; a preempted or timed-out run saves its
        checkpoint before submitit requeues the job (sf_hydra/app/requeue.py)."""
