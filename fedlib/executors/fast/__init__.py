"""The fast executors: the clients stacked under vmap, fixed-shape steps and CUDA graphs."""
