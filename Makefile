# Two commands for a fresh machine: `make demo` (builds a small .venv-demo with the redis
# extra) and `make test` (builds .venv with the dev extra). CONTRIBUTING.md has the rest:
# `make services` once, then `make pytest ARGS=...` for one test, file or tier.
.PHONY: demo test lint clean services pytest stop-services docs docs-build

demo:
	bash -c 'export VENV=.venv-demo EXTRAS=redis; source scripts/venv.sh && .venv-demo/bin/parallel-scheduler demo'

test:
	bash scripts/test.sh $(ARGS)

lint:
	bash -euc 'source scripts/venv.sh; .venv/bin/ruff check .; .venv/bin/ruff format --check .; .venv/bin/mypy'

# Start the test servers, or reuse the ones answering, and print their environment (export
# lines only): eval "$(make -s services)". They run until `make stop-services`.
services:
	@bash -euc 'source scripts/venv.sh >&2; .venv/bin/python -m devtools.services start'

# pytest alone (no ruff, mypy, import contracts or package check), with the servers'
# environment: make pytest ARGS="tests/storage/test_x.py -k y". Leaves the servers running.
pytest:
	@bash -euc 'source scripts/venv.sh >&2; exports=$$(.venv/bin/python -m devtools.services start); eval "$$exports"; exec .venv/bin/python -m pytest "$$@"' pytest $(ARGS)

# The documentation site (mkdocs.yml): `make docs` serves it with live reload on
# http://127.0.0.1:8000, `make docs-build` builds it into site/ as `make test` does (--strict).
docs:
	bash -euc 'source scripts/venv.sh; export NO_MKDOCS_2_WARNING=1; .venv/bin/mkdocs serve --dev-addr 127.0.0.1:8000'

docs-build:
	bash -euc 'source scripts/venv.sh; export NO_MKDOCS_2_WARNING=1; .venv/bin/mkdocs build --strict --site-dir site'

stop-services:
	bash -euc 'source scripts/venv.sh >&2; .venv/bin/python -m devtools.services stop'

clean:
	rm -rf .venv .venv-demo .mypy_cache .ruff_cache .pytest_cache build *.egg-info
