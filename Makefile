# Two entry points on a fresh machine (see README): `make demo` and `make test`.
PY ?= python3
PIP ?= $(PY) -m pip

.PHONY: install demo test check bench

install:
	$(PIP) install -q -e '.[test]'

demo: install
	ect demo

test: install
	$(PY) -m pytest -q

check:
	$(PY) -m ruff check runner tests benchmarks

bench:
	for b in benchmarks/*.py; do $(PY) $$b; done
