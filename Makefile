# Two entry points on a fresh machine (see README): `make demo` and `make test`.
# Both work in a project-local virtual environment, $(VENV) (default .venv/, git-ignored), made
# with the interpreter $(PY): the system site-packages are never touched (PEP 668: Debian 12+
# and Ubuntu 23.04+ refuse `pip install` into the distribution's interpreter). When $(PY) cannot
# make a venv (Debian ships `venv`/`ensurepip` in python3-venv), that package is installed via
# apt as root or with sudo, as are bubblewrap and, for the tests, chromium (the report
# screenshot test and the viewer's Playwright tests drive Debian's chromium, never a Playwright
# browser download) when missing.
# `make demo` installs only what it runs: the runtime dependencies and the `view` extra (the demo
# ends with an `ect view` command); `make test` installs the `test` extra (whatever
# pyproject.toml lists there). Afterwards: `.venv/bin/ect ...` or
# `source .venv/bin/activate`.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get

.PHONY: venv install install-test sysdeps sysdeps-test demo test test-slow test-orphans test-vm check bench clean-venv mutate

sysdeps:
	@command -v bwrap >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		$(APT) install -y -qq bubblewrap; }

sysdeps-test: sysdeps
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		$(APT) install -y -qq --no-install-recommends chromium fonts-dejavu-core; }
	@command -v scmp_sys_resolver >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		$(APT) install -y -qq --no-install-recommends seccomp; }

# The venv itself. `import ensurepip` fails on Debian/Ubuntu until python3-venv is installed.
$(VPY):
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
		echo "ect-runner needs Python >= 3.11; $(PY) is $$($(PY) -V 2>&1):" \
			"pass PY=/path/to/python3.11 (or newer)" >&2; exit 2; }
	@$(PY) -c 'import venv, ensurepip' 2>/dev/null || { \
		echo "$(PY) cannot create a virtual environment: installing python3-venv" >&2; \
		$(SUDO) apt-get update -qq && $(APT) install -y -qq python3-venv; }
	$(PY) -m venv $(VENV)

venv: $(VPY)

# Stamps: reinstall when pyproject.toml changes. The package is installed editable, so source
# edits need no reinstall.
$(VENV)/.installed-runtime: pyproject.toml | $(VPY)
	@echo "installing ect-runner, its runtime dependencies and the view extra into $(VENV)/ (pip)" >&2
	$(VPY) -m pip install --progress-bar off -e '.[view]'
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(VPY)
	@echo "installing ect-runner with its view and test extras into $(VENV)/ (pip)" >&2
	$(VPY) -m pip install --progress-bar off -e '.[view,test]'
	@touch $@ $(VENV)/.installed-runtime

install: $(VENV)/.installed-runtime
install-test: $(VENV)/.installed-test

demo: sysdeps install
	$(VPY) -m runner demo
	@echo "ect is installed in $(VENV)/: run $(VENV)/bin/ect --help (or: source $(VENV)/bin/activate)"

test: sysdeps-test install-test
	$(VPY) -m pytest -q

test-slow: sysdeps-test install-test
	$(VPY) -m pytest -q -m slow

# 100 SIGKILLs of a runner at random instants: nothing of its sandboxes may be left once its
# reaper is done (docs/sandbox.md "When the runner ends"; the default suite runs 12).
test-orphans: sysdeps-test install-test
	ECT_ORPHAN_KILLS=100 nice $(VPY) -m pytest -q tests/sandbox/test_no_orphans.py

check: install-test
	$(VPY) -m ruff check runner tests benchmarks
	$(VPY) -m mypy

# Every benchmark prints its headline (ours vs the baseline measured in the same run) last;
# after all of them ran, the headlines are printed again together.
bench: install-test
	@heads=$$(mktemp); out=$$(mktemp); trap 'rm -f "$$heads" "$$out" "$$out.rc"' EXIT; \
	for b in benchmarks/*.py; do \
		echo "== $$b"; \
		{ $(VPY) -u $$b; echo $$? > "$$out.rc"; } | tee "$$out"; \
		[ "$$(cat "$$out.rc")" = 0 ] || { echo "$$b failed" >&2; exit 1; }; \
		tail -n 1 "$$out" >> "$$heads"; \
	done; \
	echo "== headlines"; cat "$$heads"

clean-venv:
	rm -rf $(VENV)

# Mutation testing of runner/control with mutmut (opt-in: thousands of mutants, long; see
# docs/control.md "Mutation testing"). It copies the package into ./mutants, runs the control
# tests that reach each mutant and prints the score per module. MUTANTS narrows the run with
# mutmut name globs (MUTANTS='runner.control._ledger*'); results are kept between runs, so a
# module at a time adds up. `mutmut results` lists survivors, `mutmut show NAME` one diff. CI
# runs a bounded, deterministic subset instead (tests/control/test_mutation.py).
# `make mutate`: mutmut's operators over runner/control, then the extra operators mutmut lacks
# (statement deletion, and/or swaps, case-insensitive comparisons; tests/control/extra_mutation.py),
# then the nine hand-written maintainer bugs the bundled evals must catch (tests/control/maintainer_bugs.py).
# MUTANTS narrows mutmut (name globs), EXTRA_MODULES the extra run (e.g. EXTRA_MODULES='_guards').
mutate: install-test
	nice -n 10 $(VPY) -m mutmut run --max-children 2 $(MUTANTS)
	$(VPY) -m tests.control.mutation
	nice -n 10 $(VPY) -m tests.control.extra_mutation -v $(EXTRA_MODULES)
	nice -n 10 $(VPY) -m tests.control.maintainer_bugs

# The sandbox on Debian 12's stock kernel (6.1, Landlock ABI 2) with cgroup v2, in a VM (opt-in,
# long: not in .ci/run). Builds a Debian 12 root filesystem from Debian's packages (mmdebstrap),
# installs this checkout with the guest's own python3, boots it with qemu (KVM when it works, else
# TCG: about 10-20 min) and runs the sandbox probes, a memory and a CPU over-limit call,
# preflight and `ect demo --limit 24` as root, as root in a service-like leaf cgroup and as a
# normal user (with and without a delegated cgroup); then compares with this host. Results in
# .vm/results-<kernel>.json. x86_64 and root only. See tests/vm/run.sh for its knobs.
test-vm: install
	@command -v mmdebstrap >/dev/null 2>&1 && command -v qemu-system-x86_64 >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -qq && $(APT) install -y -qq --no-install-recommends \
			mmdebstrap qemu-system-x86 e2fsprogs; }
	$(SUDO) env PY=$(abspath $(VPY)) bash tests/vm/run.sh
