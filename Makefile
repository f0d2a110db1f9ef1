# kiln build and test entry points. `make test` is what CI runs (.ci/run);
# `make cluster` sets up a fresh Debian host as root and creates a local cluster.
GO ?= go
BIN := bin/kiln
CLUSTER_DIR ?= _cluster
# Root-only steps (host packages, e2e tests) run when this is 0.
UID := $(shell id -u)
# Host packages the local platform needs: debootstrap builds the node image,
# systemd-container runs machines, ignition provides ignition-validate;
# gcc, make, libc6-dev and bzip2 build the conformance suite's BusyBox.
# gcc, libc6-dev, pkg-config and libseccomp-dev: the node image's runc is built
# with cgo, linked statically with libseccomp (platforms/nodeimage).
# skopeo is the OCI client the end-to-end tests push to a cluster's registry with.
# nftables: test/guard.sh, the stray-packet guard the end-to-end suite runs under.
HOST_PACKAGES := debootstrap systemd-container iproute2 iptables nftables ignition zstd ca-certificates gcc make libc6-dev bzip2 pkg-config libseccomp-dev skopeo
# make host-test boots a Debian 12 VM under qemu (TCG) to run kiln in it.
VM_PACKAGES := qemu-system-x86 qemu-utils
# Machines share the host's inotify instances (about 32 each, docs/local-platform.md).
INOTIFY_INSTANCES := 512

.PHONY: all build conformance-helper test test-all unit validate-ignition deps deps-vm install-packages host-prep e2e host-test cluster destroy node-image bench conformance conformance-subset netpol clean

all: build

# kiln runs inside machines and pods too (the bound /usr/local/bin/kiln),
# so it is linked statically.
# -buildvcs=auto stamps the commit (kiln version) in a git checkout, even
# where GOFLAGS turns stamping off.
build:
	$(STATIC) $(GO) build $(STATIC_FLAGS) -buildvcs=auto -o $(BIN) ./cmd/kiln

# The helper of the conformance tooling (test/conformance/cmd/conformance):
# `conformance build` builds the upstream conformance suite (make e2e starts
# it in the background). Built as kiln is, so it links kiln's compiled
# packages.
CONFORMANCE_HELPER := bin/conformance
conformance-helper:
	$(STATIC) $(GO) build $(STATIC_FLAGS) -o $(CONFORMANCE_HELPER) ./test/conformance/cmd/conformance

# Every build and test without the race detector compiles as kiln's binary
# is built (no cgo, -trimpath): vet, the unit tests without the detector,
# the end-to-end tests and the kiln they build then share one compiled copy
# of the dependencies (k8s.io, etcd, Terraform's libraries) in the Go build
# cache. With the default settings each of those would compile its own, a
# few minutes apiece on a cold cache (docs/benchmarks.md).
STATIC := CGO_ENABLED=0
STATIC_FLAGS := -trimpath

# Unit tests: every package without the race detector, as kiln is built
# (sharing its compiled dependencies); then, under the detector (it needs
# cgo and a C compiler), the packages whose code or tests start goroutines
# or hold locks (RACE_PKGS: the ones it can find anything in). Under it,
# -short skips the tests that start hundreds of kiln processes (lock and
# crash tests) and the provider's round trips through Terraform (every
# apply starts the race-built provider: 10x slower, past the default test
# timeout on a busy host); the first run has them. Building every test
# binary under the detector took about half of a cold make unit
# (docs/benchmarks.md). go vet runs every analyzer first, so both go test
# runs skip the subset they would run again (-vet=off): that second pass
# over kiln's packages and all their dependencies took 137 of a cold
# go test's 224 s.
RACE_PKGS = $(shell grep -rlE --include='*.go' '^\s*go [[:alpha:]_]|sync\.Mutex|sync\.RWMutex|sync\.WaitGroup|sync\.Once|errgroup|t\.Parallel' assets cmd data graph ignition platforms | xargs -n1 dirname | sort -u | sed 's|^|./|')
unit:
	$(STATIC) $(GO) vet $(STATIC_FLAGS) ./...
	$(STATIC) $(GO) test $(STATIC_FLAGS) -vet=off ./...
	$(GO) test -race -short -vet=off $(RACE_PKGS)

# Debian's Ignition 2.14, the one on the nodes, validates what kiln emits.
validate-ignition: build
	@command -v ignition-validate >/dev/null || { echo "ignition-validate missing: apt-get install ignition"; exit 1; }
	@tmp=$$(mktemp -d) && cp docs/examples/install-config-local.yaml $$tmp/install-config.yaml && \
	  $(BIN) create ignition-configs --dir $$tmp --log-level warn </dev/null && \
	  for f in bootstrap master worker; do ignition-validate $$tmp/$$f.ign || exit 1; echo "ignition-validate: $$f.ign ok"; done; \
	  rm -rf $$tmp

deps:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(HOST_PACKAGES)"

# qemu without its recommended GUI packages: the VM has no display.
deps-vm:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(VM_PACKAGES)" APT_FLAGS=--no-install-recommends

install-packages:
	@if [ "$(UID)" = 0 ]; then \
	  missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then echo "installing:" $$missing; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_FLAGS) $$missing; fi; \
	else echo "not root: skipping host packages ($(PACKAGES))"; fi

# The host settings kiln's preflight asks for: fs.inotify.max_user_instances
# raised, br_netfilter loaded (a no-op where the kernel has it built in).
host-prep:
	@cur=$$(sysctl -n fs.inotify.max_user_instances); if [ $$cur -lt $(INOTIFY_INSTANCES) ]; then \
	  echo "fs.inotify.max_user_instances: $$cur -> $(INOTIFY_INSTANCES) (machines share it)"; \
	  sysctl -qw fs.inotify.max_user_instances=$(INOTIFY_INSTANCES); fi
	@[ -d /proc/sys/net/bridge ] || { echo "loading br_netfilter (kube-proxy must see bridged pod traffic)"; modprobe br_netfilter; }

# End-to-end tests: node image build and boot, machines, Terraform, and whole
# clusters (3 masters + 1 worker, then 1 master), each destroyed afterwards.
# The node image is built (or found cached) first; then, while the tests
# run, the conformance suite the last cluster test runs is built (or found)
# in the background at a lower priority: on a cold cache it takes the CPU
# the clusters leave idle instead of holding up the end of the run
# (docs/benchmarks.md). Its log is printed if it fails (the cluster test
# then builds it again itself, and fails naming why).
e2e: deps host-prep build conformance-helper
	@mkdir -p $(E2E_LOG_DIR)
	$(BIN) build node-image --dir $(E2E_LOG_DIR)
	@pid=; if [ "$$KILN_E2E_CONFORMANCE" != 0 ] && [ "$$KILN_E2E_CLUSTER" != 0 ]; then \
	  echo "building the conformance suite in the background (nice 10; log $(E2E_LOG_DIR)/conformance-build.log)"; \
	  nice -n 10 $(CONFORMANCE_HELPER) build --dir $(E2E_LOG_DIR) >$(E2E_LOG_DIR)/conformance-build.log 2>&1 & pid=$$!; \
	fi; \
	KILN_E2E=1 $(STATIC) $(GO) test $(STATIC_FLAGS) ./test/e2e/ -v -count=1 -timeout 100m; rc=$$?; \
	if [ -n "$$pid" ] && ! wait $$pid; then echo "the background conformance build failed:"; tail -n 30 $(E2E_LOG_DIR)/conformance-build.log; fi; \
	exit $$rc

# Where make e2e's kiln builds keep their logs.
E2E_LOG_DIR := _out/e2e

# What make test and make test-all say when they are not run as root.
NOT_ROOT = echo "not root: end-to-end and host tests skipped (they need root: machines are systemd-nspawn containers)"

# As root: the end-to-end tests, then the host test when its VM is built
# already (every machine after its first make host-test or make test-all):
# under emulation it takes about 50 min on these 2-core machines, more
# than a cold make test can add within CI's budget. Without its VM it
# prints a SKIP line naming it (docs/benchmarks.md, "The host test").
test: unit
	@if [ "$(UID)" = 0 ]; then $(MAKE) --no-print-directory deps validate-ignition e2e deps-vm && \
	test/host/run.sh --if-cached; \
	else $(NOT_ROOT); fi

# make test with the host test whether or not its VM is built, the
# tests of the older Kubernetes release (a cluster of it, an upgrade from
# it) whether or not its node image is
# built (KILN_E2E_RELEASES=1), and the e2e tests too long for make test's
# hour, which it SKIPs by name (KILN_E2E_ALL=1; as root).
test-all: unit
	@if [ "$(UID)" = 0 ]; then KILN_E2E_RELEASES=1 KILN_E2E_ALL=1 $(MAKE) --no-print-directory deps validate-ignition e2e host-test; \
	else $(NOT_ROOT); fi

# kiln on a host that is what users have: a Debian 12 VM (debootstrap, stock
# kernel, systemd, cgroup v2) under qemu with TCG, no network; 1 master + 1
# worker created, used and destroyed inside (test/host/run.sh).
# KILN_VM_INIT=tini runs it on the same VM with a PID 1 that is not systemd.
host-test: deps deps-vm build
	test/host/run.sh

# Builds (or reuses from the kiln cache) the local platform's node image.
# Needs root and Go; a cold build takes tens of minutes (docs/node-image.md).
node-image: build
	$(BIN) build node-image

cluster: deps host-prep build
	@mkdir -p $(CLUSTER_DIR)
	@[ -f $(CLUSTER_DIR)/install-config.yaml ] || [ -f $(CLUSTER_DIR)/.kiln_state.json ] || \
	  cp docs/examples/install-config-local.yaml $(CLUSTER_DIR)/install-config.yaml
	$(BIN) create cluster --dir $(CLUSTER_DIR)

destroy: build
	$(BIN) destroy cluster --dir $(CLUSTER_DIR)

bench: deps host-prep build
	test/bench/cluster.sh

# KILN_GUARD=1 runs make conformance, conformance-subset and netpol under
# the stray-packet guard (test/guard.sh run): they fail when a packet of a
# cluster or test network crossed the host's default-route interface.
GUARD = $(if $(filter 1,$(KILN_GUARD)),test/guard.sh run)

# The upstream Kubernetes conformance suite ([Conformance] specs of e2e.test
# at the pinned release), built offline and cached, against $(CLUSTER_DIR)'s
# cluster (created with 3 masters + 2 workers when there is none) or
# KUBECONFIG. Needs root; docs/conformance.md.
conformance: deps host-prep build
	GO=$(GO) CLUSTER_DIR=$(CLUSTER_DIR) $(GUARD) test/conformance/run.sh full

# The short subset the end-to-end suite runs (unless KILN_E2E_CONFORMANCE=0).
conformance-subset: deps host-prep build
	GO=$(GO) CLUSTER_DIR=$(CLUSTER_DIR) $(GUARD) test/conformance/run.sh subset

# The upstream NetworkPolicy specs ([Feature:NetworkPolicy] of the same
# e2e.test) against $(CLUSTER_DIR)'s cluster (3 masters + 2 workers when
# there is none) or KUBECONFIG; prints "netpol: P passed, F failed, S
# skipped of N" (docs/conformance.md).
netpol: deps host-prep build
	GO=$(GO) CLUSTER_DIR=$(CLUSTER_DIR) $(GUARD) test/conformance/run.sh netpol

clean:
	rm -rf bin
