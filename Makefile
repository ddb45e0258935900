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
# The verbs families through Slurm on the soft-RoCE nodes (ci/softroce/slurm-up.sh): Slurm picks two of the three
# guests for each case; one small size, few iterations (TCG: plumbing, not performance). min_overlap=0: under TCG
# perftest takes seconds to set up after the runner's barrier, so concurrent flows' windows overlap 10-70 %;
# the overlap is still measured and stored (flow_overlap), not judged. Latency: RDMA write only; ib_send_lat's clock
# calibration failed (times print as inf) in 4 of 6 runs on loaded guests, ib_write_lat's in none (on the
# AMD host of 2026-12-01 in 2 of 3 attempts: retried, SOFTROCE_RETRIES).
SOFTROCE_SLURM_SMOKE := -n 'PerftestLatency%operation=rdma_write' -n PerftestBandwidth \
                  -n 'PerftestBinding%case=bidir-1proc' -n 'PerftestMultiPair%program=ib_write_bw%pairs=2' \
                  -n 'VerbsTwoPort%case=(stripe-uni-1proc|bind-bi-1proc)' -n RdmaTopology \
                  -S message_sizes=4096 -S iterations=100 -S duration=4 -S min_overlap=0 -S pair_timeout=240 \
                  -S VerbsTwoPort.message_sizes=4K:16K -S VerbsTwoPort.iterations=5 -S VerbsTwoPort.window=4
# perftest's clock calibration fails now and then on the busy emulated CPUs: retried (ibrepro.softroce.config.RETRIES)
SOFTROCE_RETRIES = $(shell $(BIN)/python -c 'from ibrepro.softroce.config import RETRIES; print(RETRIES)')
SOFTROCE_SLURM_RFM = $(BIN)/reframe -C configs/softroce-slurm.py -c reframe-checks --exec-policy=serial \
                     --max-retries=$(SOFTROCE_RETRIES) -r
SOFTROCE_RUN = $(BIN)/ibrepro softroce run --nodes 2 --extra build/bench-verbs -- \
               $(BIN)/reframe -C configs/softroce.py --system softroce -c reframe-checks \
               --exec-policy=serial --max-retries=$(SOFTROCE_RETRIES) -r
.PHONY: help setup test test-quick test-long test-all run report nightly where baseline refs catalog otava spack wheelhouse constraints clean \
        cluster-up cluster-down cluster-status cluster-smoke cluster-test ci-templates-test cgroup-up cgroup-down \
        cgroup-test fleet-up fleet-down fleet-test \
        softroce-up softroce-down softroce-status softroce-test softroce-nightly \
        softroce-slurm-up softroce-slurm-down softroce-slurm-smoke softroce-slurm-test

help:
	@echo "make setup      install ibrepro, its pinned dependencies and the embedded default's MPI stacks"
	@echo "make test       run the test suite (pytest), without the long end-to-end proofs (minutes)"
	@echo "make test-quick the tests that start no ReFrame session and no MPI program (two minutes)"
	@echo "make test-long  the long end-to-end proofs: many nights through the nightly flow, the power harness"
	@echo "make test-all   both"
	@echo "make run        run every experiment this machine can run (reframe -C $(CONFIG) -c reframe-checks -r)"
	@echo "make report     this system beside the papers, its history and its link limits (HTML + Markdown)"
	@echo "make nightly    run, store, compare with the history; fails on a failed check or a regression"
	@echo "make where      print where results are stored"
	@echo "make baseline   write references for this system from its last 5 nights"
	@echo "make refs       validate the papers' reference data (reference-data/)"
	@echo "make catalog    the papers' experiments, their checks, and what this system can run"
	@echo "make otava      install Apache Otava (.deps/otava): where the charts' changes began"
	@echo "make spack      build the benchmarks with Spack into .deps/spack-view/\$$SPACK_ENV (docs/spack.md)"
	@echo "make wheelhouse download every wheel setup needs into wheelhouse/ (for air-gapped sites)"
	@echo "make cluster-test  (root) a real two-node Slurm cluster: up, the inter-node families, faults, down"
	@echo "make ci-templates-test (root) the GitLab nightly template run by gitlab-ci-local on that cluster"
	@echo "make cgroup-test   (root) a cgroup-confined two-node Slurm cluster beside it: binding of the pair cases, down"
	@echo "make fleet-test    (root) an 8-node Slurm cluster on a tbf-shaped namespace fat tree: faults named, down"
	@echo "make softroce-test (root) QEMU guests with soft-RoCE ports: boot, the verbs smoke set, down"
	@echo "make softroce-slurm-test (root) Slurm over 3 soft-RoCE guests: up, the verbs families via srun, faults, down"

setup:
	@scripts/setup.sh

# The suite on up to 4 cores (pytest-xdist: one worker takes a whole test file, so its module-scoped stored
# histories are built once), without the long end-to-end proofs; PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= auto
PYTEST_ARGS ?=
test:
	$(BIN)/pytest -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile -m 'not long' $(PYTEST_ARGS)

# Without ReFrame sessions or MPI runs (the `integration` marker): about two minutes on two cores
test-quick:
	$(BIN)/pytest -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile -m 'not integration and not long' $(PYTEST_ARGS)

# The long end-to-end proofs: many nights through the nightly flow, the power harness (CI runs them as a phase)
test-long:
	$(BIN)/pytest -n $(PYTEST_WORKERS) --maxprocesses 4 -m long $(PYTEST_ARGS)

test-all: test test-long

# The main job: reframe -C $(CONFIG) -c reframe-checks -r, then where the results are and what did not run here.
# Exit status: reframe's (non-zero when a check fails), non-zero too when the session was not stored.
run:
	@scripts/run-checks.sh $(CONFIG)

# This system beside the papers, its history and its link limits: reports/<system>/<timestamp>/
report:
	$(BIN)/ibrepro report

# The nightly mode: run, store, judge against the history, re-run the suspects, report (ibrepro nightly).
# Exit: 0 clean, 1 regression (or a check that failed after its job ran), 2 could not judge (a case that never ran,
# unreadable data), 3 inconclusive (too noisy to judge).
nightly:
	$(BIN)/ibrepro nightly -C $(CONFIG)

where:
	@$(BIN)/ibrepro where

baseline:
	$(BIN)/ibrepro baseline --last 5

refs:
	$(BIN)/ibrepro refs validate

catalog:
	$(BIN)/ibrepro catalog -C $(CONFIG)

# Apache Otava in a virtual environment of its own (ibrepro.changepoints): it brings numpy, scipy, cloud clients.
otava:
	$(BIN)/python -c 'from ibrepro import changepoints; changepoints.install()'

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

# The GitLab nightly template run by gitlab-ci-local (pinned: ci/templates/gitlab-ci-local/) on that cluster, with a
# site configuration made from the template: a clean night, a failing case, a configuration for other hosts
# (tests/test_ci_pipelines.py). The cluster is torn down whatever happened.
ci-templates-test:
	ci/templates/install-gitlab-ci-local.sh
	ci/cluster/up.sh
	status=0; $(BIN)/pytest -q tests/test_ci_pipelines.py || status=$$?; \
	 ci/cluster/down.sh; exit $$status

# -- a cgroup-confined cluster beside the default one (root; ci/cluster/README.md) ----------------------
# Its own work directory, names, addresses and ports, so it runs whether or not the default cluster is up; its
# nodes confine each job step to the CPUs Slurm granted it (task/cgroup + ConstrainCores).
CGROUP_CLUSTER := IBREPRO_CLUSTER_DIR=/tmp/ibrepro-cgroup IBREPRO_CLUSTER_NAME=cgroup IBREPRO_CLUSTER_PREFIX=ibc- \
                  IBREPRO_CLUSTER_NET=203.0.113 IBREPRO_CLUSTER_SLURMCTLD_PORT=6917 IBREPRO_CLUSTER_SLURMD_PORT=6918 \
                  IBREPRO_CLUSTER_SLURMDBD_PORT=6919 IBREPRO_CLUSTER_MARIADB_PORT=3317 IBREPRO_CLUSTER_CGROUP=1

cgroup-up:
	$(CGROUP_CLUSTER) ci/cluster/up.sh

cgroup-down:
	$(CGROUP_CLUSTER) ci/cluster/down.sh

# Up, the pair cases as ReFrame generates them run on the confined nodes (tests/test_cgroup_binding.py), down:
# torn down whatever happened.
cgroup-test:
	$(CGROUP_CLUSTER) ci/cluster/up.sh
	status=0; $(CGROUP_CLUSTER) $(BIN)/pytest -q -rs tests/test_cgroup_binding.py || status=$$?; \
	 $(CGROUP_CLUSTER) ci/cluster/down.sh; exit $$status

# -- the fleet's proving ground: 8 nodes on a namespace fat tree (root; ci/cluster/README.md, docs/fleet.md) ------
# Beside the other clusters (own directory, names, addresses, ports); 2 leaf and 2 spine router namespaces, every
# link shaped by tbf (ci/cluster/fabric.sh degrades one). FLEET_NIGHTS: fault-free nights of the test, the issue's 20
# (~6 min of the fleet test's ~9).
FLEET_CLUSTER := IBREPRO_CLUSTER_DIR=/tmp/ibrepro-fattree IBREPRO_CLUSTER_NAME=fattree IBREPRO_CLUSTER_PREFIX=ibf- \
                 IBREPRO_CLUSTER_NET=198.19.27 IBREPRO_CLUSTER_SLURMCTLD_PORT=7017 IBREPRO_CLUSTER_SLURMD_PORT=7018 \
                 IBREPRO_CLUSTER_SLURMDBD_PORT=7019 IBREPRO_CLUSTER_MARIADB_PORT=3327 IBREPRO_CLUSTER_NODES=8 \
                 IBREPRO_CLUSTER_FABRIC=fattree
FLEET_NIGHTS ?= 20

fleet-up:
	$(FLEET_CLUSTER) ci/cluster/up.sh

fleet-down:
	$(FLEET_CLUSTER) ci/cluster/down.sh

# Up, one night per single fault (node cable, uplink, downlink; -10 % and -25 %) and FLEET_NIGHTS fault-free
# nights through ReFrame (tests/test_fleet_fattree.py), down whatever happened.
fleet-test:
	$(FLEET_CLUSTER) ci/cluster/up.sh
	status=0; $(FLEET_CLUSTER) IBREPRO_FLEET_NIGHTS=$(FLEET_NIGHTS) $(BIN)/pytest -q -rs tests/test_fleet_fattree.py \
	 || status=$$?; $(FLEET_CLUSTER) ci/cluster/down.sh; exit $$status

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

# -- Slurm over soft-RoCE nodes: slurmd in QEMU guests, two rails each (root; ci/softroce/README.md) -------
softroce-slurm-up:
	make -s -C benchmarks verbs BUILD=../build/bench-verbs
	IBREPRO_SOFTROCE_EXTRA=build/bench-verbs ci/softroce/slurm-up.sh

softroce-slurm-down:
	ci/softroce/slurm-down.sh

softroce-slurm-smoke:
	$(SOFTROCE_SLURM_RFM) $(SOFTROCE_SLURM_SMOKE)

# Up, the verbs smoke set through Slurm, the fault tests, down: torn down whatever happened.
softroce-slurm-test:
	$(MAKE) --no-print-directory softroce-slurm-up
	status=0; $(MAKE) --no-print-directory softroce-slurm-smoke || status=$$?; \
	 $(BIN)/pytest -q tests/test_softroce_slurm.py || status=$$?; \
	 ci/softroce/slurm-down.sh; exit $$status

wheelhouse:
	$(BIN)/pip download --disable-pip-version-check -d wheelhouse -c constraints.txt '.[test]' \
	    $$(sed -n 's/^\(impi-rt\|mpich\)==/&/p' constraints.txt)

constraints:
	@echo "regenerate: $(BIN)/pip freeze --exclude-editable > constraints.txt, then re-add the MPI wheel pins"

clean:
	rm -rf $(VENV) .deps build

# -- simulated testbeds: the papers' clusters as SimGrid SMPI models (docs/simulation.md) ----------------
# SimGrid from Debian (root: installed here when missing), then our benchmarks and NAS IS built with smpicc.
SIMULATED_RUN = $(BIN)/reframe -C configs/simulated.py --system simulated -c reframe-checks -r
# CI: the seed-000 set on both 000 testbeds (point-to-point, collectives at 4x1, 4x2, 8x1, NAS IS at 4x1, 4x2).
# Iterations: a simulation has no noise, 20 per size give IMB's values at a fraction of the cost.
SIMULATED_CI := -n 'BenchIMB%case=(PingPong|Uniband|Biband)-2x1$$' \
                -n 'BenchIMB%case=(Alltoall|Bcast|Allgather|Allreduce)-(4x1|4x2|8x1)$$' \
                -n 'NPB%case=is\.B-4x[12]$$' -n SoftwareVersions \
                -S BenchIMB.iterations=20 -S 'valid_systems=simulated:pcie-sdr,simulated:pcix-sdr'
# Nightly: every family the models run, on every testbed (002's Table 2 layouts of NAS IS among them); only IS
# of the NPB programs is built here.
SIMULATED_NIGHTLY := -x RdmaTopology -n 'BenchIMB|BiDirectional|SoftwareVersions|NPB%case=is\.' \
                     -S BenchIMB.iterations=100
.PHONY: simulated-build simulated-test simulated-nightly

simulated-build:
	@command -v smpirun >/dev/null && command -v gfortran >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing SimGrid (libsimgrid-dev) and gfortran from Debian"; \
	    apt-get install -y -qq --no-install-recommends libsimgrid-dev gfortran >/dev/null || \
	    { apt-get update -qq && apt-get install -y -qq --no-install-recommends libsimgrid-dev gfortran >/dev/null; }; \
	  else echo "SimGrid missing: as root, apt-get install libsimgrid-dev gfortran" >&2; exit 1; fi; }
	$(BIN)/ibrepro simulated build

# The CI job: the seed-000 set through ReFrame, the tests of the simulated system, the paper-vs-model table.
simulated-test: simulated-build
	@status=0; $(SIMULATED_RUN) $(SIMULATED_CI) || status=$$?; \
	 $(BIN)/ibrepro simulated table --last 1 || status=$$?; \
	 $(BIN)/pytest -q tests/test_simulated.py || status=$$?; exit $$status

simulated-nightly: simulated-build
	@status=0; $(SIMULATED_RUN) $(SIMULATED_NIGHTLY) || status=$$?; \
	 $(BIN)/ibrepro report --system simulated || status=$$?; \
	 $(BIN)/ibrepro simulated table --last 1 || status=$$?; exit $$status
