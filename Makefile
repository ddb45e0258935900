# ibrepro: see README.md. `make setup`, `make test`, then `make run`.
VENV    := .venv
BIN     := $(VENV)/bin
CONFIG  ?= configs/local.py
export PATH := $(CURDIR)/$(BIN):$(PATH)

SPACK_ENV ?= generic
# The MPI-level families across the two CI nodes: the papers' inter-node layouts with short sweeps (TCP over
# veth on shared cores: plumbing, not performance), IMB and our own benchmarks.
CLUSTER_SMOKE := -t '^(imb|bench|system)$$' -S msglog=0:16 -S iterations=100 -S time_per_sample=5 -S sizes=1:65536 \
                 -S BufferReuse.max_memory=64
.PHONY: help setup test run where baseline refs catalog spack wheelhouse constraints clean \
        cluster-up cluster-down cluster-status cluster-smoke cluster-test

help:
	@echo "make setup      install ibrepro, its pinned dependencies and the embedded default's MPI stacks"
	@echo "make test       run the test suite (pytest)"
	@echo "make run        run every experiment this machine can run (reframe -C $(CONFIG) -c reframe-checks -r)"
	@echo "make where      print where results are stored"
	@echo "make baseline   write references for this system from its last 5 sessions"
	@echo "make refs       validate the papers' reference data (reference-data/)"
	@echo "make catalog    the papers' experiments, their checks, and what this system can run"
	@echo "make spack      build the benchmarks with Spack into .deps/spack-view/\$$SPACK_ENV (docs/spack.md)"
	@echo "make wheelhouse download every wheel setup needs into wheelhouse/ (for air-gapped sites)"
	@echo "make cluster-test  (root) a real two-node Slurm cluster: up, the inter-node families, faults, down"

setup:
	@scripts/setup.sh

test:
	$(BIN)/pytest

# The main job. Exit status: reframe's (non-zero when a check fails); where the results are is printed anyway.
run:
	@$(BIN)/reframe -C $(CONFIG) -c reframe-checks -r; status=$$?; \
	 echo; $(BIN)/ibrepro where; exit $$status

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

# Up, smoke, the fault tests, down: the cluster is torn down whatever happened.
cluster-test:
	ci/cluster/up.sh
	status=0; $(MAKE) --no-print-directory cluster-smoke || status=$$?; \
	 $(BIN)/pytest -q tests/test_cluster.py || status=$$?; \
	 ci/cluster/down.sh; exit $$status

wheelhouse:
	$(BIN)/pip download --disable-pip-version-check -d wheelhouse -c constraints.txt '.[test]' \
	    $$(sed -n 's/^\(impi-rt\|mpich\)==/&/p' constraints.txt)

constraints:
	@echo "regenerate: $(BIN)/pip freeze --exclude-editable > constraints.txt, then re-add the MPI wheel pins"

clean:
	rm -rf $(VENV) .deps build
