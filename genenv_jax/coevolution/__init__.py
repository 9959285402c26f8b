"""The co-evolution step: the run's assembly from a config (build) and the jitted step's phases."""
