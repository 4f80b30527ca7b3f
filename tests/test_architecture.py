"""The broker's layers: which of its packages may import which, and no cycles between them.

Every import in ``src/cebroker`` (including those inside functions, under ``TYPE_CHECKING`` and
``importlib.import_module("cebroker...")`` with a literal name) is read with :mod:`ast` and
checked against :data:`ALLOWED`. A *unit* is a top-level module or package of ``cebroker``
(``errors``, ``pipeline``, ...; ``cebroker`` itself is the package's ``__init__``). Imports
inside one unit are free; between units only the table's edges are allowed, and the graph of
the imports that exist must have no cycle. ``docs/architecture.md`` shows the same table.

The libraries stand apart: nothing in ``filters/`` (cefilters) or ``protocols/`` (ceprotocols)
imports ``cebroker``.

Inside ``storage`` the backends' internals (``storage/sqlite/``, ``storage/postgres/``) are
imported only by the factory (``storage/backends.py``) and the composition root; the storage
contracts import no backend and no database driver; the pipeline is given a shared backend's
claims, it never asks the log whether it is ``shared``; and no SQL text is turned into bytes
with ``.encode()`` nor any PL/pgSQL kept in a Python string (it lives in ``.sql`` files).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Plain values, errors, declarations and the contracts between parts: no other unit.
BOTTOM = frozenset(
    {
        "cebroker",
        "errors",
        "options",
        "settings",
        "clock",
        "contracts",
        "subscription_rules",
        "subscription",
        "subscription_settings",
        "logs",
        "principal",
        "network",
        "tenant_policies",
        "broker_events",
    }
)
#: Storage: the contracts and backends of every table the broker keeps.
STORAGE = frozenset({"storage"})
#: HTTP helpers shared by every part that serves routes.
WEB = frozenset({"web"})
#: Access control: credentials to principals, the scope of each route, the audit log.
ACCESS = frozenset({"auth"})
#: Secrets at rest: a sealing layer over any backend's subscription store.
SEALING = frozenset({"sealing"})
#: Telemetry: spans, OTLP export, HTTP server metrics; the parts that trace get a ``Tracing``.
TELEMETRY = frozenset({"telemetry"})
#: The parts of the service; none imports another.
PARTS = frozenset({"api", "pipeline", "registry", "sources", "spark", "console"})

#: unit -> the units it may import (besides itself).
ALLOWED: Mapping[str, frozenset[str]] = {
    **{unit: BOTTOM for unit in BOTTOM},
    **{unit: BOTTOM for unit in STORAGE},
    "web": BOTTOM,
    "telemetry": BOTTOM,
    "api": BOTTOM | STORAGE | WEB | TELEMETRY,
    "pipeline": BOTTOM | STORAGE | WEB | TELEMETRY,
    "registry": BOTTOM | STORAGE | WEB | TELEMETRY,
    "sources": BOTTOM | STORAGE | WEB | TELEMETRY,
    "spark": BOTTOM,
    "console": BOTTOM | STORAGE | WEB | TELEMETRY,
    # The management commands: a client of the HTTP API, never of the broker's insides.
    "client": BOTTOM,
    "auth": BOTTOM | WEB,
    "sealing": BOTTOM | STORAGE,
    # The composition root creates every part and wires them to each other.
    "app": BOTTOM | STORAGE | WEB | PARTS | ACCESS | SEALING | TELEMETRY,
    "cli": BOTTOM | STORAGE | WEB | PARTS | ACCESS | SEALING | TELEMETRY | {"app", "client"},
    "__main__": frozenset({"cli"}),
}

#: The storage backends' internals.
BACKEND_PACKAGES = ("cebroker.storage.sqlite", "cebroker.storage.postgres")
#: The only modules outside a backend that may import it: the factory and the composition root.
BACKEND_IMPORTERS = frozenset({"cebroker.storage.backends", "cebroker.app"})
#: The drivers a backend is written with; the storage contracts import none of them.
DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg_pool"})
#: PL/pgSQL (a function body or its language) in a Python string.
PLPGSQL = re.compile(r"(?i)\blanguage\s+plpgsql\b|\$\$")


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement: ``importer`` (a module) imports ``imported`` at ``where``."""

    importer: str
    imported: str
    where: str


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _literal_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("...")`` or ``__import__("...")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> Iterator[Import]:
    """Every import in the file of ``module``, relative ones resolved, anywhere in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, where)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # ``from pkg import name`` imports the submodule when there is one.
                submodule = f"{base}.{alias.name}"
                yield Import(module, submodule if submodule in known else base, where)
        elif isinstance(node, ast.Call) and (name := _literal_import(node)) is not None:
            yield Import(module, name, where)


def unit_of(module: str, package: str) -> str | None:
    """The unit ``module`` belongs to, or None when it is outside ``package``."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    return parts[1] if len(parts) > 1 else package


def package_imports(root: Path, package: str) -> list[Import]:
    """Every import of a module of ``package`` by another module of ``package``."""
    known = modules(root, package)
    return [
        found
        for module, path in known.items()
        for found in imports_of(module, path, known)
        if unit_of(found.imported, package) is not None
    ]


def violations(found: list[Import], package: str, allowed: Mapping[str, frozenset[str]]) -> list[str]:
    """One line per import between units that ``allowed`` does not list, and per unknown unit."""
    problems: list[str] = []
    for item in found:
        source, target = unit_of(item.importer, package), unit_of(item.imported, package)
        if source is None or target is None or source == target:
            continue
        if source not in allowed:
            problems.append(f"{item.where}: {source!r} is not in the layer table")
        elif target not in allowed[source]:
            problems.append(f"{item.where}: {item.importer} imports {item.imported} ({source} -> {target})")
    return sorted(set(problems))


def cycles(found: list[Import], package: str) -> list[list[str]]:
    """The groups of units that import each other, directly or through others (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for item in found:
        source, target = unit_of(item.importer, package), unit_of(item.imported, package)
        if source is not None and target is not None and source != target:
            graph[source].add(target)
            graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


# -- the broker -----------------------------------------------------------------------------------


def test_every_import_between_units_is_allowed_by_the_table() -> None:
    found = package_imports(ROOT / "src", "cebroker")
    assert len(found) > 50  # the scan really read the package
    assert violations(found, "cebroker", ALLOWED) == []


def test_no_cycle_between_units() -> None:
    assert cycles(package_imports(ROOT / "src", "cebroker"), "cebroker") == []


def test_every_unit_is_in_the_table() -> None:
    units = {unit_of(m, "cebroker") for m in modules(ROOT / "src", "cebroker")}
    assert units - set(ALLOWED) == set()


@pytest.mark.parametrize(("library", "package"), [("filters", "cefilters"), ("protocols", "ceprotocols")])
def test_the_libraries_never_import_the_broker(library: str, package: str) -> None:
    known = modules(ROOT / library, package)
    assert known
    found = [
        i for m, p in known.items() for i in imports_of(m, p, known) if i.imported.split(".")[0] == "cebroker"
    ]
    assert found == []


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def backend_leaks(found: list[Import]) -> list[str]:
    """One line per import of a backend's internals from outside that backend, other than by
    :data:`BACKEND_IMPORTERS`."""
    return sorted(
        f"{item.where}: {item.importer} imports {item.imported} (a storage backend's internals)"
        for item in found
        for backend in BACKEND_PACKAGES
        if _inside(item.imported, backend)
        and not _inside(item.importer, backend)
        and item.importer not in BACKEND_IMPORTERS
    )


def contract_backend_imports(root: Path, package: str) -> list[str]:
    """One line per import of a backend or a database driver by a storage module that is
    neither in a backend nor the factory (the contracts and what they share)."""
    known = modules(root, package)
    storage = f"{package}.storage"
    backends = [f"{package}.{b.partition('.')[2]}" for b in BACKEND_PACKAGES]
    problems: list[str] = []
    for module, path in known.items():
        if not _inside(module, storage) or any(_inside(module, b) for b in backends):
            continue
        if module == f"{package}.storage.backends":
            continue
        for item in imports_of(module, path, known):
            if item.imported.split(".")[0] in DRIVERS or any(_inside(item.imported, b) for b in backends):
                problems.append(f"{item.where}: {module} imports {item.imported}")
    return sorted(problems)


def shared_flags(root: Path, package: str) -> list[str]:
    """Every ``<something>.shared`` read in the pipeline (it is given claims instead)."""
    problems: list[str] = []
    for module, path in modules(root, package).items():
        if not _inside(module, f"{package}.pipeline"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "shared":
                problems.append(f"{path}:{node.lineno}: {module} reads .shared")
    return problems


def sql_in_python(root: Path, package: str) -> list[str]:
    """In the storage package: ``.encode()`` on a module constant (SQL text) and PL/pgSQL in a
    string."""
    problems: list[str] = []
    for module, path in modules(root, package).items():
        if not _inside(module, f"{package}.storage"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "encode"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id.isupper()
            ):
                problems.append(f"{where}: {node.func.value.id}.encode()")
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and PLPGSQL.search(node.value)
            ):
                problems.append(f"{where}: PL/pgSQL in a Python string")
    return problems


def test_only_the_factory_and_the_composition_root_import_a_storage_backend() -> None:
    found = package_imports(ROOT / "src", "cebroker")
    assert any(_inside(i.imported, BACKEND_PACKAGES[0]) for i in found)  # the scan sees backends
    assert backend_leaks(found) == []


def test_the_storage_contracts_import_no_backend_and_no_driver() -> None:
    assert contract_backend_imports(ROOT / "src", "cebroker") == []


def test_the_pipeline_is_given_claims_and_reads_no_shared_flag() -> None:
    assert shared_flags(ROOT / "src", "cebroker") == []


def test_no_sql_text_is_encoded_and_no_plpgsql_is_kept_in_python() -> None:
    assert sql_in_python(ROOT / "src", "cebroker") == []


# -- the checker, on a made-up package ---------------------------------------------------------------


def _package(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


LAYERED = {
    "cebroker/__init__.py": "",
    "cebroker/errors.py": "class BrokerError(Exception): ...\n",
    "cebroker/web/__init__.py": "",
    "cebroker/web/problem.py": "from cebroker.errors import BrokerError\n",
    "cebroker/pipeline/__init__.py": "",
    "cebroker/pipeline/ingest.py": "from ..errors import BrokerError\nfrom cebroker.web import problem\n",
    "cebroker/app.py": "import cebroker.pipeline.ingest\n",
}


def test_the_checker_passes_a_layered_package(tmp_path: Path) -> None:
    found = package_imports(_package(tmp_path, LAYERED), "cebroker")
    assert {(i.importer, i.imported) for i in found} == {
        ("cebroker.web.problem", "cebroker.errors"),
        ("cebroker.pipeline.ingest", "cebroker.errors"),
        ("cebroker.pipeline.ingest", "cebroker.web.problem"),
        ("cebroker.app", "cebroker.pipeline.ingest"),
    }
    assert violations(found, "cebroker", ALLOWED) == []
    assert cycles(found, "cebroker") == []


def test_the_checker_refuses_an_upward_import_even_inside_a_function(tmp_path: Path) -> None:
    upward = {
        **LAYERED,
        "cebroker/errors.py": """
            class BrokerError(Exception):
                def answer(self) -> object:
                    from cebroker.web.problem import problem
                    return problem
        """,
    }
    found = package_imports(_package(tmp_path, upward), "cebroker")
    (problem,) = violations(found, "cebroker", ALLOWED)
    assert "cebroker.errors imports cebroker.web.problem (errors -> web)" in problem
    assert problem.startswith(f"{tmp_path / 'cebroker' / 'errors.py'}:4:")
    assert cycles(found, "cebroker") == [["errors", "web"]]


def test_the_checker_refuses_a_sideways_import_and_a_dynamic_one(tmp_path: Path) -> None:
    sideways = {
        **LAYERED,
        "cebroker/registry/__init__.py": """
            import importlib
            importlib.import_module("cebroker.pipeline.ingest")
        """,
        "cebroker/api/__init__.py": "from cebroker import registry\n",
    }
    found = package_imports(_package(tmp_path, sideways), "cebroker")
    assert [p.split(": ", 1)[1] for p in violations(found, "cebroker", ALLOWED)] == [
        "cebroker.api imports cebroker.registry (api -> registry)",
        "cebroker.registry imports cebroker.pipeline.ingest (registry -> pipeline)",
    ]


def test_the_checker_finds_cycles_the_table_would_allow(tmp_path: Path) -> None:
    loop = {
        **LAYERED,
        "cebroker/api/__init__.py": "from cebroker.pipeline import ingest\n",
        "cebroker/pipeline/__init__.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                import cebroker.api
        """,
    }
    found = package_imports(_package(tmp_path, loop), "cebroker")
    lenient = {**ALLOWED, "api": ALLOWED["api"] | {"pipeline"}, "pipeline": ALLOWED["pipeline"] | {"api"}}
    assert violations(found, "cebroker", lenient) == []
    assert cycles(found, "cebroker") == [["api", "pipeline"]]


def test_the_checker_refuses_a_unit_missing_from_the_table(tmp_path: Path) -> None:
    extra = {**LAYERED, "cebroker/plugins.py": "from cebroker.errors import BrokerError\n"}
    found = package_imports(_package(tmp_path, extra), "cebroker")
    (problem,) = violations(found, "cebroker", ALLOWED)
    assert "'plugins' is not in the layer table" in problem


def test_the_storage_checks_refuse_a_leak_a_driver_a_shared_flag_and_encoded_sql(tmp_path: Path) -> None:
    leaky = {
        **LAYERED,
        "cebroker/storage/__init__.py": "",
        "cebroker/storage/backends.py": "from cebroker.storage.sqlite import backend\n",
        "cebroker/storage/queue.py": "import sqlite3\nfrom cebroker.storage.postgres.rows import LogBase\n",
        "cebroker/storage/sqlite/__init__.py": "",
        "cebroker/storage/sqlite/backend.py": """
            FIND = "SELECT 1"
            BODY = "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$"
            def run(conn: object) -> bytes:
                return FIND.encode()
        """,
        "cebroker/storage/postgres/__init__.py": "",
        "cebroker/storage/postgres/rows.py": "class LogBase: ...\n",
        "cebroker/pipeline/ingest.py": """
            from cebroker.storage.sqlite.backend import FIND
            def go(log: object) -> bool:
                return bool(log.shared)
        """,
    }
    root = _package(tmp_path, leaky)
    found = package_imports(root, "cebroker")
    assert [p.split(": ", 1)[1] for p in backend_leaks(found)] == [
        "cebroker.pipeline.ingest imports cebroker.storage.sqlite.backend (a storage backend's internals)",
        "cebroker.storage.queue imports cebroker.storage.postgres.rows (a storage backend's internals)",
    ]
    assert [p.split(": ", 1)[1] for p in contract_backend_imports(root, "cebroker")] == [
        "cebroker.storage.queue imports sqlite3",
        "cebroker.storage.queue imports cebroker.storage.postgres.rows",
    ]
    assert [p.split(": ", 1)[1] for p in shared_flags(root, "cebroker")] == [
        "cebroker.pipeline.ingest reads .shared"
    ]
    assert sorted(p.split(": ", 1)[1] for p in sql_in_python(root, "cebroker")) == [
        "FIND.encode()",
        "PL/pgSQL in a Python string",
    ]
