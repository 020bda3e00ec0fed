"""fedlib: a reproducible companion to FedCKA, FedIntR, FedER and FedSHIBU.

Modules, one concept each:
    config      Config: identity vs execution fields, validation
    presets     each paper's setup at each scale, quoting its sentences; named variants
    data        datasets as device tensors (load_dataset, FedDataset), synthetic data
    loaders     readers of each dataset's on-disk format (idx, CIFAR pickles, SVHN .mat, Tiny ImageNet)
    augment     on-device augmentation (flip, crop, cutout): random draws, then one batched op
    partition   seeded client partitions (iid, dirichlet, shards, label groups)
    models      CNNs and ResNets that return named representation taps; representations()
    kernels     CKA family, effective rank, stable rank, EVBMF
    params      Params (a model's tensors by name) and the helpers that copy, move and check them
    schedule    client sampling, lr schedule, batch plans and their randomness; the non-finite error
    optim       OptimizerSpec: torch.optim for the sequential executor, functional steps for the vectorized one
    local       the one local step: Needs, LocalTask, ClientJob, local_loss
    executors   sequential and vectorized executors (chunks of stacked clients, static steps / CUDA graphs,
                per-client CPU convolutions, reference taps once per round)
    strategies  one file per algorithm (FedAvg, FedProx, centralized, ...) over the Strategy hooks
    engine      the federated loop (rounds, sampling, aggregation, evaluation, checkpoints)
    results     the record store (atomic writes, provenance) and run(cfg)
    atomic      atomic file writes
    similarity  layer-wise CKA between federated models (FedCKA Fig. 2 / Fig. 6), of a stored run: run_similarity
    grid        grids of runs as tables: seeds as mean ± std, the best μ per method, "pending" cells
    timing      training cost per round of strategies on synthetic data of a dataset's shape (FedCKA Tables 3-4)
    plots       figure helpers that stamp provenance
    plans       the runs each notebook needs at each scale (one module per notebook)
    report      paper-vs-ours tables and claims collected per notebook
    reproduce   the papermill batch runner
    campaign    every plan's runs costed, prioritized and trained within a budget (costs, ledger, ray_backend)
"""

__version__ = "0.1.0"
