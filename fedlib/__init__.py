"""fedlib: a reproducible companion to FedCKA, FedIntR, FedER and FedSHIBU.

Modules, one concept each:
    data        datasets as device tensors, on-device augmentation
    partition   seeded client partitions (iid, dirichlet, shards, label groups)
    models      CNNs and ResNets that return named representation taps
    kernels     CKA family, effective rank, EVBMF
    strategies  one file per algorithm (FedAvg, FedProx, ...)
    engine      the federated loop (rounds, sampling, local training, aggregation)
    results     experiment configs, presets, and the on-disk record store
    plots       figure helpers that stamp provenance
"""

__version__ = "0.1.0"
