# The two commands of the README. Both set up .venv first (idempotent).
SCALE ?= quick
DEVICE ?= cpu
BUDGET ?= 25m
# make test: pytest-xdist processes (one per core of a 2-core CI host)
TEST_JOBS ?= 2

.PHONY: reproduce test setup lab campaign bundle gpu-check
reproduce: setup   ## render every notebook at $(SCALE) from the committed records (trains nothing); figures/ + results/summary-$(SCALE).md
	.venv/bin/python -m fedlib.companion.reproduce --scale $(SCALE) --device $(DEVICE) --no-train

test: setup        ## unit tests + notebooks under nbval at smoke scale, then their committed quick outputs compared with a render from the records
	FEDLIB_SCALE=smoke .venv/bin/python -m pytest -q -n $(TEST_JOBS) --dist loadfile notebooks tests --nbval-lax --durations=10
	FEDLIB_SCALE=quick FEDLIB_TRAIN=0 .venv/bin/python -m pytest -q -n $(TEST_JOBS) --dist loadfile notebooks --nbval

setup:
	bash scripts/setup.sh

lab: setup
	.venv/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root,)

campaign: setup    ## the planned runs within a budget: make campaign SCALE=paper DEVICE=cuda BUDGET=25m (docs/campaign.md)
	.venv/bin/python -m fedlib.companion.campaign run --scale $(SCALE) --device $(DEVICE) --budget $(BUDGET)

bundle:            ## an offline bundle (wheels, Fashion-MNIST, source, install.sh) in bundle/: docs/campaign.md
	bash scripts/offline-bundle.sh --out bundle

gpu-check: setup   ## on a GPU first: every strategy x path (eager, CUDA graph, sequential) agree; its costs measured
	.venv/bin/python benchmarks/gpu_check.py $(if $(filter 1 yes true,$(SMOKE)),--smoke,)
