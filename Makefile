# Two entry points on a fresh machine (see README): `make demo` and `make test`.
# Both install what they need first: the Python package (pip) and, when missing, Debian's
# bubblewrap (and chromium for the test suite's report screenshot and the viewer's Playwright
# tests, which drive Debian's chromium, never a Playwright browser download), via apt as root or sudo.
PY ?= python3
PIP ?= $(PY) -m pip
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install sysdeps sysdeps-test demo test test-slow check bench mutate

sysdeps:
	@command -v bwrap >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq bubblewrap; }

sysdeps-test: sysdeps
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; }
	@command -v scmp_sys_resolver >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends seccomp; }

install:
	$(PIP) install -q -e '.[test]'

demo: sysdeps install
	$(PY) -m runner demo

test: sysdeps-test install
	$(PY) -m pytest -q

test-slow: sysdeps-test install
	$(PY) -m pytest -q -m slow

check:
	$(PY) -m ruff check runner tests benchmarks
	$(PY) -m mypy

bench: install
	for b in benchmarks/*.py; do $(PY) $$b || exit 1; done

# Mutation testing of runner/control with mutmut (opt-in: thousands of mutants, long). It
# copies the package into ./mutants, runs the control tests against every mutant and prints
# the score; `mutmut results` lists the survivors, `mutmut show NAME` one diff. CI runs a
# bounded, deterministic subset instead (tests/control/test_mutation.py).
mutate: install
	$(PY) -m mutmut run --max-children 2 $(MUTANTS)
	$(PY) -m mutmut export-cicd-stats
	$(PY) -m tests.control.mutation mutants/mutmut-cicd-stats.json
