"""The floor plan stays as drawn: small modules, no import cycles, and the file names that tell
a newcomer where a job is accepted, claimed, sent, retried and fired.

The layers themselves are import-linter's contracts (``[tool.importlinter]`` in pyproject.toml),
checked by ``lint-imports`` in ``make test``; this adds what import-linter does not check.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("parallel_scheduler", "storage_adapters")
#: The most lines a product module may have: past it, a module does more than one job.
MAX_MODULE_LINES = 420


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports, at any depth in it (a function's imports too)."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            candidates = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for candidate in candidates:
            # the longest known module the name falls in: ``a.b.c`` imported means ``a.b.c``,
            # ``from a.b import f`` means ``a.b``
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def test_no_product_module_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {long}"


def test_no_import_cycles_between_modules() -> None:
    """Package ``__init__`` modules re-export their package's names, so an edge into a package
    counts as an edge into the modules it re-exports, not as a cycle through the package."""
    modules = _modules()
    known = set(modules)
    graph = {
        name: {t for t in _imports(name, path, known) if not _is_package(t, modules)}
        for name, path in modules.items()
        if not _is_package(name, modules)
    }
    cycles = _strongly_connected(graph)
    assert not cycles, f"import cycles: {cycles}"


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: every group of two or more modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_a_newcomer_finds_each_step_of_a_job_by_file_name() -> None:
    """Accepted (the client), claimed (one module per release path), sent, retried (storage and
    broker calls; Celery's retries stored as delayed jobs) and fired (recurring ticks)."""
    steps = {
        "accepted": ["parallel_scheduler/client.py", "parallel_scheduler/job_checks.py"],
        "claimed": [
            "parallel_scheduler/delayed/claim_per_job.py",
            "parallel_scheduler/delayed/claim_batch.py",
            "parallel_scheduler/delayed/claim_one_script.py",
            "parallel_scheduler/delayed/claim_in_transaction.py",
        ],
        "sent": ["parallel_scheduler/delayed/sending.py"],
        "retried": [
            "parallel_scheduler/engine/retrying.py",
            "parallel_scheduler/celery/stored_retries.py",
        ],
        "fired": ["parallel_scheduler/recurring/firing.py"],
    }
    missing = {
        step: [p for p in paths if not (ROOT / p).is_file()] for step, paths in steps.items()
    }
    assert not any(missing.values()), missing


def test_the_graph_reads_the_whole_product() -> None:
    """The checks above see every module: the walk finds the packages' known modules."""
    modules = _modules()
    assert "parallel_scheduler.delayed.scheduler" in modules
    assert "storage_adapters.sql.storage" in modules
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        edges[name] = _imports(name, path, set(modules))
    assert "parallel_scheduler.engine.locked_loop" in edges["parallel_scheduler.delayed.scheduler"]
