# Two commands for a fresh machine: `make demo` and `make test`. Each builds .venv first.
.PHONY: demo test lint clean

demo:
	bash -c 'source scripts/venv.sh && .venv/bin/parallel-scheduler demo'

test:
	bash scripts/test.sh $(ARGS)

lint:
	bash -euc 'source scripts/venv.sh; .venv/bin/ruff check .; .venv/bin/ruff format --check .; .venv/bin/mypy'

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache build *.egg-info
