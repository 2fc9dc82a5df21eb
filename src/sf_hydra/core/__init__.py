"""The shared vocabulary every layer may use: the trajectory spec, the door between learner and sampler,
spaces, metric names, game records, faults and config errors, the optional extras, atomic files, seeding,
`_target_` lookup, the run folder, the stop signals and the launch clock. It imports nothing else of
sf_hydra."""
