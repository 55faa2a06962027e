# clustertune - top-level entry points. `make setup` is idempotent and quick once done.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
STAMP := .stamps

# Debian packages the project needs (system MPI, BLAS, PnetCDF, TLS, namespaces, reference
# tools; gfortran builds the official NPB and MILC peers for the bench scripts).
APT_PACKAGES := build-essential cmake pkg-config python3 python3-venv \
	openmpi-bin libopenmpi-dev mpich libmpich-dev \
	libopenblas-dev liblapacke-dev libblis-dev libatlas-base-dev libblas3 \
	libpnetcdf-dev pnetcdf-bin netcdf-bin hwloc libssl-dev openssl gfortran \
	iproute2 iptables util-linux hostname iputils-ping procps \
	iperf3 netpipe-tcp netpipe-openmpi netpipe-mpich2 hpcc pvm pvm-dev slurm-wlm munge \
	openssh-server openssh-client chromium \
	globus-gatekeeper globus-gram-job-manager globus-gram-job-manager-fork-setup-poll \
	globus-gram-client-tools globus-proxy-utils globus-gsi-cert-utils-progs globus-gram-job-manager-slurm

FLAVOURS := serial openmpi mpich

.PHONY: setup apt venv kernels test lint demo clean
setup: apt venv kernels

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		for attempt in 1 2 3 4 5; do \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing && break; \
			echo "apt-get failed (dpkg lock?), retrying in 10 s"; sleep 10; \
		done; \
	fi

venv: $(STAMP)/venv
$(STAMP)/venv: pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	@mkdir -p $(STAMP) && touch $@

# What each tree builds comes from the levels' descriptors (python -m clustertune.build).
kernels: venv
	@for f in $(FLAVOURS); do \
		mpi=$$f; [ $$f = serial ] && mpi=none; \
		$(VENV)/bin/python -m clustertune.build $$f build/$$f/kernels.cmake || exit 1; \
		test -f build/$$f/CMakeCache.txt || cmake -S kernels -B build/$$f -DCT_MPI=$$mpi >/dev/null || exit 1; \
		cmake --build build/$$f -j 2 -- --no-print-directory | grep -v '^\[' ; test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done
	@# the I/O server and its fuzzer under ASan + UBSan (tests/test_io_fuzz.py, bench/io_fuzz.py)
	@test -f build/sanitize/CMakeCache.txt || cmake -S kernels -B build/sanitize -DCT_MPI=openmpi \
		-DCT_SANITIZE=ON -DCT_MANIFEST=$(CURDIR)/kernels/io/sanitize.cmake >/dev/null || exit 1; \
	cmake --build build/sanitize -j 2 -- --no-print-directory | grep -v '^\[' ; test $${PIPESTATUS[0]} -eq 0

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: setup lint
	$(VENV)/bin/pytest -q --durations=25

demo: setup
	$(VENV)/bin/python -m clustertune.demo

clean:
	rm -rf build $(STAMP) $(VENV)
