"""The `mujoco` family: gymnasium MuJoCo v5 tasks with continuous actions."""
