# ibrepro: see README.md. `make setup`, `make test`, then `make run`.
VENV    := .venv
BIN     := $(VENV)/bin
CONFIG  ?= configs/local.py
export PATH := $(CURDIR)/$(BIN):$(PATH)

SPACK_ENV ?= generic
# The MPI-level families across the two CI nodes: the papers' inter-node layouts with short sweeps (TCP over
# veth on shared cores: plumbing, not performance), IMB and our own benchmarks.
CLUSTER_SMOKE := -t '^(imb|bench|system)$$' -S message_sizes=1:64K -S iterations=100 -S time_per_sample=5 \
                 -S BufferReuse.max_memory=64
# The verbs families in soft-RoCE guests (emulated: plumbing, not performance): one small size, few iterations.
SOFTROCE_SMOKE := -n 'PerftestLatency%operation=(send|rdma_write)' -n PerftestBandwidth \
                  -n 'PerftestBinding%case=bidir-1proc' -n 'PerftestMultiPair%program=ib_write_bw%pairs=2' \
                  -n 'VerbsTwoPort%case=(stripe-uni-1proc|bind-bi-1proc)' -n RdmaTopology \
                  -S message_sizes=4096 -S iterations=100 -S pair_timeout=240 \
                  -S VerbsTwoPort.message_sizes=2:16K -S VerbsTwoPort.iterations=5 -S VerbsTwoPort.window=4
# ... and every verbs family, a few sizes each (nightly; about an hour of TCG time)
SOFTROCE_FULL := -t '^(verbs|multirail|system)$$' -S message_sizes=65536 -S iterations=200 \
                 -S VerbsTwoPort.message_sizes=2:64K -S VerbsTwoPort.iterations=10 -S VerbsTwoPort.window=16
SOFTROCE_RUN = $(BIN)/ibrepro softroce run --nodes 2 --extra build/bench-verbs -- \
               $(BIN)/reframe -C configs/softroce.py --system softroce -c reframe-checks \
               --exec-policy=serial --max-retries=2 -r
.PHONY: help setup test run report nightly where baseline refs catalog spack wheelhouse constraints clean \
        cluster-up cluster-down cluster-status cluster-smoke cluster-test \
        softroce-up softroce-down softroce-status softroce-test softroce-nightly

help:
	@echo "make setup      install ibrepro, its pinned dependencies and the embedded default's MPI stacks"
	@echo "make test       run the test suite (pytest)"
	@echo "make run        run every experiment this machine can run (reframe -C $(CONFIG) -c reframe-checks -r)"
	@echo "make report     this system beside the papers, its history and its link limits (HTML + Markdown)"
	@echo "make nightly    run, store, compare with the history; fails on a failed check or a regression"
	@echo "make where      print where results are stored"
	@echo "make baseline   write references for this system from its last 5 sessions"
	@echo "make refs       validate the papers' reference data (reference-data/)"
	@echo "make catalog    the papers' experiments, their checks, and what this system can run"
	@echo "make spack      build the benchmarks with Spack into .deps/spack-view/\$$SPACK_ENV (docs/spack.md)"
	@echo "make wheelhouse download every wheel setup needs into wheelhouse/ (for air-gapped sites)"
	@echo "make cluster-test  (root) a real two-node Slurm cluster: up, the inter-node families, faults, down"
	@echo "make softroce-test (root) QEMU guests with soft-RoCE ports: boot, the verbs smoke set, down"

setup:
	@scripts/setup.sh

test:
	$(BIN)/pytest

# The main job: reframe -C $(CONFIG) -c reframe-checks -r, then where the results are and what did not run here.
# Exit status: reframe's (non-zero when a check fails), non-zero too when the session was not stored.
run:
	@scripts/run-checks.sh $(CONFIG)

# This system beside the papers, its history and its link limits: reports/<system>/<timestamp>/
report:
	$(BIN)/ibrepro report

# The nightly mode: run, store, compare with the history; non-zero on a failed check or a regression.
nightly:
	@status=0; scripts/run-checks.sh $(CONFIG) --mode nightly || status=$$?; \
	 $(BIN)/ibrepro report --nightly || status=$$?; exit $$status

where:
	@$(BIN)/ibrepro where

baseline:
	$(BIN)/ibrepro baseline --last 5

refs:
	$(BIN)/ibrepro refs validate

catalog:
	$(BIN)/ibrepro catalog -C $(CONFIG)

# Spack reads SPACK_ENV as its active environment: the script takes the name from it, then unsets it.
spack:
	scripts/spack-setup.sh $(SPACK_ENV)

# -- a real Slurm cluster of two namespace nodes (root; ci/cluster/README.md) ------------------------
cluster-up:
	ci/cluster/up.sh

cluster-down:
	ci/cluster/down.sh

cluster-status:
	ci/cluster/status.sh

# The smoke checks (plumbing of each MPI stack), then the project's families across the two nodes.
cluster-smoke:
	$(BIN)/reframe -C configs/ci-cluster.py -c ci/cluster/checks -r
	$(BIN)/reframe -C configs/ci-cluster.py -c reframe-checks -r $(CLUSTER_SMOKE)
	IBREPRO_HOME=$${IBREPRO_HOME:-$${IBREPRO_CLUSTER_DIR:-/tmp/ibrepro-cluster}/ibrepro-home} \
	    $(BIN)/ibrepro report --system ci-cluster

# Up, smoke, the fault tests, down: the cluster is torn down whatever happened.
cluster-test:
	ci/cluster/up.sh
	status=0; $(MAKE) --no-print-directory cluster-smoke || status=$$?; \
	 $(BIN)/pytest -q tests/test_cluster.py || status=$$?; \
	 ci/cluster/down.sh; exit $$status

# -- soft-RoCE nodes: QEMU guests with rdma_rxe ports (root; ci/softroce/README.md) -------------------
softroce-up:
	make -s -C benchmarks verbs BUILD=../build/bench-verbs
	$(BIN)/ibrepro softroce up --nodes 2 --extra build/bench-verbs

softroce-down:
	$(BIN)/ibrepro softroce down

softroce-status:
	$(BIN)/ibrepro softroce status

# Boot, the smoke set through ReFrame, down (softroce run takes the guests down whatever happens).
softroce-test:
	make -s -C benchmarks verbs BUILD=../build/bench-verbs
	$(SOFTROCE_RUN) $(SOFTROCE_SMOKE)

softroce-nightly:
	make -s -C benchmarks verbs BUILD=../build/bench-verbs
	$(SOFTROCE_RUN) $(SOFTROCE_FULL)

wheelhouse:
	$(BIN)/pip download --disable-pip-version-check -d wheelhouse -c constraints.txt '.[test]' \
	    $$(sed -n 's/^\(impi-rt\|mpich\)==/&/p' constraints.txt)

constraints:
	@echo "regenerate: $(BIN)/pip freeze --exclude-editable > constraints.txt, then re-add the MPI wheel pins"

clean:
	rm -rf $(VENV) .deps build
