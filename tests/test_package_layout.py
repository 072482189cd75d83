"""The Python package's import rules (docs/architecture.md, "The Python package").

Every module of ``python/ssdtwin`` is parsed (not imported) and each import, at module
level or inside a function, is resolved to the module it names:

* library (``ssdtwin``, ``drive``, ``nvmefmt``, ``live``, ``fio``): no commands, no studies,
  no typer/rich/click, no ``print()``: it returns values and raises; commands print;
* studies (``ssdtwin.studies``, and ``ssdtwin.sweep``, which runs studies' procedures as
  sweeps): the library and studies only, never commands or typer/rich/click; they report
  through the ``log`` (or progress) callables they are given;
* the fio job parser and outputs (``ssdtwin.fio`` but ``fio.run``): nothing of ssdtwin
  outside ``ssdtwin.fio`` but the compiled core, which owns fio's numbers (fio/facts.py);
* no import cycle anywhere (a function-level import counts).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "python" / "ssdtwin"
UI = ("typer", "rich", "click")


def module_name(path: Path) -> str:
    parts = ["ssdtwin", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}
KNOWN = set(MODULES) | {"ssdtwin._core"}  # the compiled extension has no .py


def imports(name: str) -> Iterator[tuple[str, int]]:
    """(absolute module, line) of every import in module `name`."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            for alias in node.names:
                sub = f"{base_name}.{alias.name}"
                yield (sub if sub in KNOWN else base_name), node.lineno


def role(name: str) -> str:
    if name.startswith(("ssdtwin.commands", "ssdtwin.__main__")):
        return "commands"
    if name.startswith(("ssdtwin.studies", "ssdtwin.sweep")):
        return "studies"
    return "library"


def test_every_module_has_a_role_and_the_roles_exist() -> None:
    roles = {role(m) for m in MODULES}
    assert roles == {"library", "commands", "studies"}
    assert {"ssdtwin.drive", "ssdtwin.commands.cli", "ssdtwin.commands.common", "ssdtwin.fio.run"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if role(m) != "commands"))
def test_library_and_studies_never_import_commands_or_the_ui(name: str) -> None:
    bad = [
        f"{name}:{line}: imports {target}"
        for target, line in imports(name)
        if role(target) == "commands"
        and target.startswith("ssdtwin")
        or target.split(".")[0] in UI
        or role(name) == "library"
        and role(target) == "studies"
        and target.startswith("ssdtwin")
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if role(m) == "library"))
def test_library_does_not_print(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text())
    calls = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"]
    assert not calls, f"{name} calls print() at lines {calls}: the library returns or raises, commands print"


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("ssdtwin.fio") and m != "ssdtwin.fio.run"))
def test_fio_parser_needs_nothing_outside_fio_but_the_core(name: str) -> None:
    bad = [t for t, _ in imports(name) if t.startswith("ssdtwin") and not t.startswith(("ssdtwin.fio", "ssdtwin._core"))]
    assert not bad, f"{name} imports {bad}: the job parser needs only the core (for fio's numbers), not the library around it"


def test_no_import_cycles() -> None:
    graph = {m: sorted({t for t, _ in imports(m) if t in MODULES and t != m}) for m in MODULES}
    done: set[str] = set()
    stack: list[str] = []

    def visit(m: str) -> None:
        if m in stack:
            cycle = stack[stack.index(m) :] + [m]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if m in done:
            return
        stack.append(m)
        for t in graph[m]:
            visit(t)
        stack.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checker itself: a library module importing a command, and a cycle, are found."""
    global MODULES, KNOWN
    saved = MODULES, KNOWN
    (tmp_path / "a.py").write_text("from .b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import y\n")
    (tmp_path / "lib.py").write_text("import typer\nfrom .commands import cli\n")
    try:
        MODULES = {
            "ssdtwin.a": tmp_path / "a.py",
            "ssdtwin.b": tmp_path / "b.py",
            "ssdtwin.lib": tmp_path / "lib.py",
            "ssdtwin.commands.cli": tmp_path / "a.py",
        }
        KNOWN = set(MODULES)
        with pytest.raises(AssertionError, match="import cycle: ssdtwin.a -> ssdtwin.b -> ssdtwin.a"):
            test_no_import_cycles()
        with pytest.raises(AssertionError, match="imports typer"):
            test_library_and_studies_never_import_commands_or_the_ui("ssdtwin.lib")
    finally:
        MODULES, KNOWN = saved
