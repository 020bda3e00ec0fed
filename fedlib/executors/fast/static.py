"""Static steps for the vectorized executor, replayed from a captured CUDA graph
(``cuda_graph=True``).

A GPU running a small CNN is bound by kernel launches, not arithmetic, and the eager step launches a
few hundred small kernels through Python, with shapes that change as clients finish. In the *static*
path every step has one shape: all ``N`` clients of the chunk run every step with a full
``batch_size`` batch, a client's padding rows are masked out of its loss (as in padded mode), a
client that has finished (or not yet reached a ragged batch) has an all-zero mask, and its update is
discarded (``torch.where`` on the parameters and the momentum buffer: no weight decay, no momentum
change, exactly as in the eager path). Every tensor the step reads or writes lives at a fixed
address (:class:`Static`: stacked parameters, momentum buffers, the global/shared parameters,
declared tensors and corrections, the step's data indices, real batch sizes, augmentation draws and
learning rates), so on CUDA the whole step — data gather, augmentation, forward, backward, SGD
update, loss accumulation — is captured once per chunk size as a CUDA graph and replayed for every
step of every round; per step the host only copies the step's indices and batch sizes in and
launches the graph. The numbers are the eager path's up to float rounding
(``tests/test_vectorized.py`` runs the static path on the CPU, ``tests/test_cuda.py`` the captured
graph on a GPU). The price is compute spent on finished clients' masked rows (all clients run ``max
K_i`` steps), which a launch-bound GPU does not notice.

When (:func:`use_static`): ``cuda_graph=None`` (the default) on CUDA whenever the requirements below
hold, silently eager otherwise; ``cuda_graph=True`` the same, with a one-line notice when they do
not hold; ``False`` never.

Requirements (otherwise the eager path): padded mode (no buffers, taps or reference models), SGD, no
``compile``, and a penalty that does not read ``ctx`` (the graph replays the Python-level values of
its capture; the static path passes a context whose ``round`` is -1 and ``lr`` NaN). A failed
capture also falls back to the eager path with a notice; a chunk whose clients start from different
frozen parameters runs eagerly too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from fedlib.augment import apply_augment
from fedlib.params import Params
from fedlib.executors.fast.chunk import Chunk, ChunkSpec, chunk_ctx

__all__ = ["StaticSteps", "use_static"]


def use_static(cuda_graph: bool | None, device: torch.device | str,
               why_not: str) -> tuple[bool, str]:
    """Whether the vectorized executor runs the static steps, and the notice to print ("" for none).

    ``cuda_graph``: ``None`` (auto) — on CUDA whenever they apply (``why_not == ""``), silently
    eager otherwise; ``True`` — whenever they apply, with a notice naming ``why_not`` when they do
    not; ``False`` — never. ``why_not``: what :meth:`StaticSteps.unsupported` says about the task
    ("" when it can run them)."""
    if cuda_graph is False:
        return False, ""
    if why_not:
        return False, (f"fedlib: CUDA graphs unavailable ({why_not}); running the vectorized "
                       "executor eagerly."
                       if cuda_graph else "")
    if cuda_graph is None and torch.device(device).type != "cuda":
        return False, ""
    return True, ""


@dataclass
class Static:
    """Every tensor a static step reads or writes, at a fixed address (what a captured CUDA graph
    replays on)."""

    train: dict[str, Tensor]  # stacked trainable parameters (N, ...)
    mom: list[Tensor]  # SGD momentum buffers (empty without momentum)
    glob: Params  # the global model (the penalty's ``global_params``)
    shared: Params  # non-trained parameters every client shares
    tensors: dict[str, Tensor]  # declared tensors shared by the chunk
    tensors_stacked: dict[str, Tensor]  # declared tensors that differ per client (N, ...)
    corr: dict[str, Tensor]  # per-client update corrections (N, ...)
    idx: Tensor  # (N, B) this step's data indices
    cnt: Tensor  # (N,) this step's real batch sizes (0: the client takes no step)
    aug: dict[str, Tensor]  # (N, B) this step's augmentation draws
    lr: Tensor  # (N,) learning rates
    loss: Tensor  # (N,) float64: Σ over steps of the mean batch loss × real batch size
    fill: float | Tensor = 0.0  # the crop's padding value (FedDataset.pad_fill), on the device
    graph: Any = None  # torch.cuda.CUDAGraph once captured


def capture(step: Callable[[], None], device: torch.device,
            warmup: int = 3) -> "torch.cuda.CUDAGraph":
    """Capture ``step`` as a CUDA graph, after ``warmup`` eager runs on a side stream (cuDNN/cuBLAS
    set-up, as PyTorch's CUDA-graph notes require). The warm-up runs change the state ``step``
    updates: reload it after."""
    s = torch.cuda.Stream(device)
    s.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream(device).wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    torch.cuda.synchronize(device)
    return graph


class StaticSteps:
    """The static path of one :class:`~fedlib.executors.fast.vectorized.VectorizedExecutor`, given
    what it reads of it: the chunk spec (task, device), its batching ``mode`` and ``compile``
    option, its vmapped loss (``loss_fn(masked)``) and the dict that loss reads the chunk's shared
    state from (``current``). ``want``: the config's ``cuda_graph`` (:func:`use_static`);
    ``require_cuda=False`` also allows the static steps, uncaptured, off CUDA (tests on the CPU). On
    CUDA the steps are always captured."""

    def __init__(self, spec: ChunkSpec, loss_fn: Callable[[bool], Callable], current: dict[str,
                                                                                           Any], *,
                 mode: str, compile: bool, want: bool | None, require_cuda: bool = True) -> None:
        self.spec, self.loss_fn, self.current = spec, loss_fn, current
        self.mode, self.compile = mode, compile
        self.enabled, notice = use_static(want, spec.device if require_cuda else "cuda",
                                          self.unsupported(require_cuda))
        if notice:
            print(notice)
        self.capture = self.enabled and spec.device.type == "cuda"
        self._statics: dict[int, Static] = {}

    @property
    def graphs(self) -> list[Any]:
        """The captured CUDA graphs, one per chunk shape trained so far (None for a shape run
        uncaptured)."""
        return [S.graph for S in self._statics.values()]

    def unsupported(self, capture: bool = True) -> str:
        """Why the static path cannot run the executor's task ("" if it can); ``capture``: also
        require CUDA."""
        if self.mode != "padded":
            return "they need padded batches: no BatchNorm buffers, taps or reference models"
        if self.spec.task.optimizer.name != "sgd":
            return "only SGD is captured"
        if self.compile:
            return "compile=True and cuda_graph=True exclude each other"
        if capture and self.spec.device.type != "cuda":
            return f"they need a CUDA device, not {self.spec.device.type!r}"
        return ""

    def _static_for(self, ch: Chunk) -> Static:
        """The fixed-address state for a chunk of ``N`` clients (made, and on CUDA captured, once
        per ``N``)."""
        task = self.spec.task
        N = len(ch.steps)
        key = (N, tuple(ch.tensors), tuple(ch.tensors_stacked), tuple(ch.corr))
        S = self._statics.get(key)
        if S is not None:
            return S
        dev, B = self.spec.device, task.batch_size
        train = {k: torch.empty_like(v) for k, v in ch.train.items()}  # the model's memory format
        S = Static(
            train=train,
            mom=[torch.zeros_like(v)
                 for v in train.values()] if task.optimizer.momentum != 0 else [],
            glob={k: torch.empty_like(v)
                  for k, v in task.global_params.items()},
            shared={k: torch.empty_like(v)
                    for k, v in ch.shared.items()},
            tensors={k: torch.empty_like(v)
                     for k, v in ch.tensors.items()},
            tensors_stacked={k: torch.empty_like(v)
                             for k, v in ch.tensors_stacked.items()},
            corr={k: torch.empty_like(v)
                  for k, v in ch.corr.items()},
            idx=torch.zeros((N, B), dtype=torch.long, device=dev),
            cnt=torch.zeros(N, dtype=torch.long, device=dev),
            aug={k: torch.empty_like(v[:, 0])
                 for k, v in ch.aug.items()},
            lr=torch.empty(N, dtype=next(iter(train.values())).dtype, device=dev),
            loss=torch.zeros(N, dtype=torch.float64, device=dev),
            # a property that copies to the device: not inside a capture
            fill=task.data.pad_fill)
        self._statics[key] = S
        if self.capture:
            self._load(S, ch)
            self._load_step(S, ch, ch.cnt.to(dev), 0)
            try:
                S.graph = capture(lambda: self.step(S), dev)
            except Exception as e:  # noqa: BLE001 — any capture failure: run the same step eagerly
                self.capture = False
                print(f"fedlib: CUDA graph capture failed ({type(e).__name__}: {e}); running the "
                      "static steps eagerly.")
        return S

    def _load(self, S: Static, ch: Chunk) -> None:
        """Copy a chunk's starting state into the fixed addresses (fresh optimizer state, zero
        loss)."""
        with torch.no_grad():
            for k, v in ch.train.items():
                S.train[k].copy_(v)
            for b in S.mom:
                b.zero_()  # m·0 + d = d exactly: torch.optim.SGD's first step (buffer = d)
            for k, v in self.spec.task.global_params.items():
                S.glob[k].copy_(v)
            for dst, src in ((S.shared, ch.shared), (S.tensors, ch.tensors),
                             (S.tensors_stacked, ch.tensors_stacked), (S.corr, ch.corr)):
                for k, v in src.items():
                    dst[k].copy_(v)
            if isinstance(ch.lr, Tensor):
                S.lr.copy_(ch.lr)
            else:
                S.lr.fill_(ch.lr)
            S.loss.zero_()

    @staticmethod
    def _load_step(S: Static, ch: Chunk, cnt: Tensor, t: int) -> None:
        S.idx.copy_(ch.idx[:, t])
        S.cnt.copy_(cnt[:, t])
        for k, v in ch.aug.items():
            S.aug[k].copy_(v[:, t])

    def run(self, ch: Chunk) -> Tensor:
        """Train the chunk with fixed-shape steps (replayed from a CUDA graph where captured);
        returns each client's summed training loss (the eager loop's ``loss_sum``)."""
        # the context the penalty sees (a captured graph keeps the one of its capture: no per-round
        # values)
        self.current["ctx"] = chunk_ctx(ch.ctxs, rnd=-1, lr=math.nan)
        S = self._static_for(ch)
        self._load(S, ch)
        cnt = ch.cnt.to(self.spec.device)
        for t in range(ch.steps[0]):
            self._load_step(S, ch, cnt, t)
            if S.graph is not None and self.capture:
                S.graph.replay()
            else:
                self.step(S)
        with torch.no_grad():
            for k, v in S.train.items():
                ch.train[k].copy_(v)
        return S.loss.clone()

    def step(self, S: Static) -> None:
        """One fixed-shape SGD step of every client in ``S``. No host synchronization: this is what
        a CUDA graph captures."""
        task, dev = self.spec.task, self.spec.device
        N, B = S.idx.shape
        flat = S.idx.reshape(-1)
        x = task.data.x_train[flat]
        if S.aug:
            x = apply_augment(x, task.augment, {k: v.reshape(-1)
                                                for k, v in S.aug.items()}, fill=S.fill)
        x = x.unflatten(0, (N, B))
        y = task.data.y_train[flat].view(N, B)
        mask = (torch.arange(B, device=dev)[None, :] < S.cnt[:, None]).to(x.dtype)
        names = list(S.train)
        leaves = {k: S.train[k].detach().requires_grad_(True) for k in names}
        # the fixed addresses a capture records
        self.current.update(shared=S.shared, glob=S.glob, tensors=S.tensors, amp_cache=False)
        losses = self.loss_fn(True)(leaves, {}, {}, x, y, mask, {}, S.tensors_stacked)
        grads = torch.autograd.grad(losses.sum(), [leaves[k] for k in names], allow_unused=True)
        active = S.cnt > 0
        params = [S.train[k] for k in names]
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        with torch.no_grad():
            # zero momentum buffers, not None: m·0 + d = d is SGD's first step exactly, in one
            # captured shape
            mom = S.mom or [None] * len(params)
            new_p, new_state = task.optimizer.step(params, grads, {"momentum_buffer": list(mom)},
                                                   t=0, lr=S.lr)
            for k, p, b, np_, nb in zip(names, params, mom, new_p, new_state["momentum_buffer"]):
                if k in S.corr:
                    np_ = np_ - S.lr.to(p.dtype).view(-1, *([1] * (p.dim() - 1))) * S.corr[k]
                on = active.view(-1, *([1] * (p.dim() - 1)))  # finished clients keep their state
                p.copy_(torch.where(on, np_, p))
                if b is not None:
                    b.copy_(torch.where(on, nb, b))
            S.loss.add_(torch.where(active, losses.detach().double() * S.cnt.double(), 0.0))
