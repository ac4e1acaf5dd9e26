"""Op families. Each folder has the same layers: reference, kernels, configs, launch, op."""
