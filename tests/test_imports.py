"""No import cycles in ``tlm/``, between modules or between its packages, and no ``hdl`` or
``verif`` import in it (the design's rule, stated in ``tlm/__init__.py``: a cluster study never
loads Amaranth or cocotb).

Every ``import`` and ``from ... import`` counts, at module level and inside functions, with
relative imports resolved; only those under ``if TYPE_CHECKING:`` are left out, since they never
run. ``from package import name`` is an edge to ``package.name`` when that is a module, else to
``package`` (an import of a package's module runs the package's ``__init__`` too, but counting
that would make every re-exporting ``__init__`` a cycle with its own modules). Imports by
``importlib.import_module`` are strings, not statements, and are not counted.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Top-level packages that ``tlm`` must not import.
FORBIDDEN = ("hdl", "verif")
#: Most cycles printed per strongly connected component.
MAX_CYCLES = 20


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by its dotted name (a package by its own)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every import node that runs: all but the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: Path, modules) -> list[tuple[str, int]]:
    """The absolute names a module imports, each with its line: a module of ``modules`` where
    the import names one, else the name as written (a third-party or forbidden package)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                head = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{head}.{base}" if base and head else head or base
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in targets:
            if target.split(".")[0] in modules:  # ours: the longest prefix that is a module
                while target not in modules:
                    target = target.rpartition(".")[0]
            out.append((target, node.lineno))
    return out


@dataclass(frozen=True, repr=False)  # no repr: a failing test prints its message, not this
class Imports:
    """``graph``: ``{module: {imported module: [(path, line), ...]}}``; ``every``: each import's
    absolute name with where it is, for the rules on outside packages."""

    graph: dict
    every: list


def import_graph(root: Path, package: str) -> Imports:
    """The module graph of ``package`` and every import in it."""
    modules = module_files(root, package)
    graph, every = {}, []
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for target, line in sorted(imports_of(name, path, modules), key=lambda t: t[1]):
            where = (path.relative_to(root).as_posix(), line)
            every.append((target, where))
            if target in modules and target != name and where not in edges.get(target, ()):
                edges.setdefault(target, []).append(where)
    return Imports(graph, every)


def package_graph(graph, depth: int = 2):
    """The same edges between packages (``tlm.X``: the first ``depth`` parts of each name)."""
    packages = {}
    for name, edges in graph.items():
        source = ".".join(name.split(".")[:depth])
        out = packages.setdefault(source, {})
        for target, where in edges.items():
            target = ".".join(target.split(".")[:depth])
            if target != source:
                out.setdefault(target, []).extend(where)
    for out in packages.values():
        for target, places in out.items():
            out[target] = sorted(set(places))
    return packages


def strongly_connected(graph) -> list[list[str]]:
    """Tarjan's components of more than one node, each sorted, in sorted order."""
    index, low, stack, on, found = {}, {}, [], set(), []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def cycles(graph, component, limit=MAX_CYCLES) -> list[list[str]]:
    """Elementary cycles inside one component, each from its smallest node (at most
    ``limit + 1``, so a caller can say there are more)."""
    inside = set(component)
    out = []
    for start in sorted(component):
        path, stack = [start], [iter(sorted(graph[start]))]
        while stack and len(out) <= limit:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                path.pop()
            elif child == start:
                out.append([*path, start])
            elif child in inside and child > start and child not in path:
                path.append(child)
                stack.append(iter(sorted(graph[child])))
    return out


def _where(places, shown=3) -> str:
    text = ", ".join(f"{path}:{line}" for path, line in places[:shown])
    return text + (f" and {len(places) - shown} more" if len(places) > shown else "")


def describe(graph, kind: str) -> str:
    """Every cycle of ``graph``, each edge with the file and line of its import; "" if none."""
    lines = []
    for component in strongly_connected(graph):
        lines.append(f"{kind} cycle among {', '.join(component)}:")
        found = cycles(graph, component)
        for cycle in found[:MAX_CYCLES]:
            steps = [f"{a} -> {b} ({_where(graph[a][b])})" for a, b in pairwise(cycle)]
            lines.append("  " + "; ".join(steps))
        if len(found) > MAX_CYCLES:
            lines.append(f"  ... and more than {MAX_CYCLES} cycles in all")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def tlm_graph():
    return import_graph(ROOT, "tlm")


def test_no_module_cycles(tlm_graph):
    graph = tlm_graph.graph
    assert len(graph) > 100  # the walk found the package
    message = describe(graph, "module")
    assert not message, "\n" + message


def test_no_package_cycles(tlm_graph):
    packages = package_graph(tlm_graph.graph)
    assert {"tlm.costs", "tlm.cluster", "tlm.presets"} <= set(packages)
    message = describe(packages, "package")
    assert not message, "\n" + message


def test_tlm_imports_neither_hdl_nor_verif(tlm_graph):
    bad = [
        f"{path}:{line} imports {target}"
        for target, (path, line) in tlm_graph.every
        if target.split(".")[0] in FORBIDDEN
    ]
    assert not bad, "\n".join(bad)


# The checker itself, on a small package written for the purpose: it finds what it must.


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_checker_finds_module_and_package_cycles(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "from .one import f\n",
            "pkg/a/one.py": "def f():\n    from ..b.two import g\n",
            "pkg/a/three.py": "",
            "pkg/b/__init__.py": "",
            "pkg/b/two.py": "from pkg.a import three\nfrom . import four\n",
            "pkg/b/four.py": "from pkg.b.two import x\n",
        },
    )
    graph = import_graph(tmp_path, "pkg").graph
    assert graph["pkg.a"] == {"pkg.a.one": [("pkg/a/__init__.py", 1)]}
    assert set(graph["pkg.b.two"]) == {"pkg.a.three", "pkg.b.four"}
    assert describe(graph, "module") == (
        "module cycle among pkg.b.four, pkg.b.two:\n"
        "  pkg.b.four -> pkg.b.two (pkg/b/four.py:1); pkg.b.two -> pkg.b.four (pkg/b/two.py:2)"
    )
    assert describe(package_graph(graph), "package") == (
        "package cycle among pkg.a, pkg.b:\n"
        "  pkg.a -> pkg.b (pkg/a/one.py:2); pkg.b -> pkg.a (pkg/b/two.py:1)"
    )


def test_checker_leaves_out_type_checking_only(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/one.py": (
                "import typing\n"
                "if typing.TYPE_CHECKING:\n    from .two import T\n"
                "else:\n    from . import three\n"
            ),
            "pkg/two.py": "from .one import x\n",
            "pkg/three.py": "import hdl.tensor\n",
        },
    )
    found = import_graph(tmp_path, "pkg")
    assert set(found.graph["pkg.one"]) == {"pkg.three"}
    assert describe(found.graph, "module") == ""
    assert ("hdl.tensor", ("pkg/three.py", 1)) in found.every
