"""No module import cycle in the application code, lazy or not.

A cycle held apart by an import inside a function (or under ``TYPE_CHECKING``) still couples the
two modules both ways; import-linter's layers contract only sees cycles that cross layers, so
this test looks at every module of console, designer and scheduling (migrations excepted). The
graph is grimp's (import-linter's own), which parses whole modules: imports inside functions and
``if TYPE_CHECKING:`` blocks count.
"""

from __future__ import annotations

import grimp

PACKAGES = ("console", "designer", "scheduling")


def _graph() -> dict[str, set[str]]:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    modules = {m for m in graph.modules if ".migrations" not in m}
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _one_loop(edges: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, for the message."""
    members = set(component)
    start = component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges[node] & members):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    return component


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _one_loop(edges, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_module_import_cycles():
    edges = _graph()
    cycles = _cycles(edges)
    report = "\n".join(f"- {len(c)} modules: {', '.join(c)}\n  e.g. {' -> '.join(_one_loop(edges, c))}" for c in cycles)
    assert not cycles, f"module import cycles (function-level imports count):\n{report}"
