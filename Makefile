# Two commands for a fresh machine: `make demo` (builds a small .venv-demo with the redis
# extra) and `make test` (builds .venv with the dev extra).
.PHONY: demo test lint clean

demo:
	bash -c 'export VENV=.venv-demo EXTRAS=redis; source scripts/venv.sh && .venv-demo/bin/parallel-scheduler demo'

test:
	bash scripts/test.sh $(ARGS)

lint:
	bash -euc 'source scripts/venv.sh; .venv/bin/ruff check .; .venv/bin/ruff format --check .; .venv/bin/mypy'

clean:
	rm -rf .venv .venv-demo .mypy_cache .ruff_cache .pytest_cache build *.egg-info
