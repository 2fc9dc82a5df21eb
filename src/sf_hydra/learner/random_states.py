"""What a resumed run needs beyond the weights to go on as the run that never stopped would have: the learner
process's random generators (torch's, numpy's, Python's: sf_hydra.core.seeding.random_states) and, with
hardware.serial_mode, the rollout workers' state (their envs mid-episode with their generators, observations,
episodes in progress: the door's `serial_state`), in every checkpoint, put back when a run resumes.

Invariant: in serial mode the generators are put back after the workers are built (building them draws
initial weights for their policy copies), by the sampler (door.restore_serial_state); otherwise when
training starts. A single-player ViZDoom env pickles as its episode's seed and actions, replayed (and checked) on
resume (envs/doom/env.py). Envs that cannot be pickled (a Doom game with bots) are not saved (one warning): such a
run resumes with its envs started anew, and only its generators and weights continue. The workers' state is a
pickle, so it is saved with this user's seal (sf_hydra.core.seal) and unpickled only when the seal verifies: a
checkpoint from elsewhere resumes as one without it (one warning naming the checkpoint); where no seal key can be
made, none is saved (the same warning as for envs that cannot be pickled)."""

from __future__ import annotations

import logging

import lightning as L

from sf_hydra.core.door import door_of
from sf_hydra.core.seeding import random_states, restore_random_states

log = logging.getLogger("sf_hydra")

KEY = "sf_hydra_resume_state"


class ResumeState(L.Callback):
    """Saves the generators' states (and the serial workers') with each checkpoint; puts them back when
    training resumes from one."""

    def __init__(self):
        self._restored = None
        self._origin = "the checkpoint"  # where the restored state came from, named if the workers' is dropped
        self._warned = False
        self._at_end = None  # the workers' state when training ended: the final checkpoint is saved after teardown

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        sampler = self._sampler_state(trainer)
        checkpoint[KEY] = {"generators": random_states(), "sampler": sampler if sampler is not None else self._at_end}

    def on_train_end(self, trainer, pl_module):
        self._at_end = self._sampler_state(trainer)

    def _sampler_state(self, trainer):
        try:
            return door_of(trainer).serial_state()
        except Exception as e:  # noqa: BLE001 (an env that cannot be pickled, no seal key: saved without it)
            if not self._warned:
                self._warned = True
                log.warning("checkpoints hold no rollout worker state (%s: %s): a resumed serial run starts its "
                            "envs anew", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            return None

    def on_load_checkpoint(self, trainer, pl_module, checkpoint):
        self._restored = checkpoint.get(KEY)  # put back when training starts (after Lightning's own set-up)
        self._origin = f"checkpoint {trainer.ckpt_path}" if trainer.ckpt_path else "the checkpoint"

    def on_train_start(self, trainer, pl_module):
        if self._restored is None:
            return
        state, self._restored = self._restored, None
        if state.get("sampler") is not None:
            door_of(trainer).restore_serial_state(state["sampler"], state["generators"], self._origin)
        else:
            restore_random_states(state["generators"])
