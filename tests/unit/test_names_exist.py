"""Names written down exist: every package's ``__all__`` resolves, and every module path, file path and
``q2_plugins.x.y`` name written in the docs (README.md, docs/*.md) and in docstrings names something that is there.
Read statically (no module is imported but the packages), so a moved module shows up here within the hour."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the packages whose modules are read
CODE = ("q2_plugins", "parlai_ext", "hf_evaluate_metric", "benchmarks", "scripts")
#: files of other projects that the docs name as such (the original Q² repository's, the user's, Python's, ParlAI's
#: data folder), each a path or the start of one
FOREIGN = ("nli_eval.py", "sitecustomize.py", "utils.py", "q2/q2.py", "data/wizard_of_wikipedia/")
#: the package's folders, so that ``jobs/ray.py`` is read as a path inside it
ROOMS = tuple(p.name for p in (ROOT / "q2_plugins").iterdir() if p.is_dir() and not p.name.startswith("_"))

# a path: something.py / .sh, or a path starting at the checkout's top or at one of the package's folders
_TOPS = "|".join(("q2_plugins", "tests", "docs", "benchmarks", "scripts", "parlai_ext", *ROOMS))
_PATH = re.compile(r"(?<![\w./:-])((?:\.\.?/)*(?:[\w.-]+/)*[\w-]+\.(?:py|sh)|(?:\.\.?/)*(?:" + _TOPS
                   + r")/[\w./-]*[\w/])(?![\w/-])")
_DOTTED = re.compile(r"(?<![\w.])q2_plugins(?:\.[A-Za-z_]\w*)+")
_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):`~?(\.[\w.]+)`")
# ``module.CONSTANT``: a module's constant, named by the module alone
_CONSTANT = re.compile(r"`([a-z][a-z0-9]*_[a-z0-9_]+)\.([A-Z][A-Z0-9_]+)`")


@lru_cache(maxsize=None)
def _packages() -> tuple[str, ...]:
    return tuple(sorted(str(p.parent.relative_to(ROOT)).replace("/", ".") for top in ("q2_plugins", "parlai_ext")
                        for p in (ROOT / top).rglob("__init__.py")))


@lru_cache(maxsize=None)
def _tracked() -> tuple[frozenset[str], frozenset[str]]:
    """The checkout's files and folders (git's, so build outputs do not count)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    files = frozenset(f for f in out if f and (ROOT / f).exists())
    folders = {str(p) for f in files for p in Path(f).parents if str(p) != "."}
    return files, frozenset(folders)


def path_exists(token: str) -> bool:
    """Whether a file or folder of the checkout ends with ``token`` (``rows/layout.py`` is
    ``q2_plugins/io/rows/layout.py``; ``../`` and ``./`` in front are a page's relative link; a path without an
    extension may be the start of file names, as ``original_run_slice/dodeca_consistent``)."""
    files, folders = _tracked()
    tail = "/" + re.sub(r"^(\.\.?/)+", "", token).rstrip("/")
    if token.endswith("/"):
        return any(("/" + f).endswith(tail) for f in folders)
    stem = "." not in tail.rsplit("/", 1)[-1]
    return any(("/" + f).endswith(tail) or (stem and tail in "/" + f) for f in files | folders)


def _module_file(dotted: str) -> Optional[Path]:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=None)
def _bound(path: Path) -> dict[str, Optional[ast.ClassDef]]:
    """Names a module binds at its top (class name -> its node), ``__all__``'s too when it has a module
    ``__getattr__`` (its lazy names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: dict[str, Optional[ast.ClassDef]] = {}
    lazy = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node in tree.body:
            names[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in tree.body:
            names[node.name] = None
            lazy = lazy or node.name == "__getattr__"
    for node in _top_statements(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({n.id: None for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)})
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.setdefault(node.name, node if isinstance(node, ast.ClassDef) else None)
    if lazy:
        names.update({name: None for name in _all_of(tree) or ()})
    return names


def _top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module's top, also inside its ``if`` / ``try`` blocks."""
    for node in body:
        yield node
        if not isinstance(node, (ast.If, ast.Try, ast.With)):
            continue
        for inner in ("body", "orelse", "finalbody"):
            yield from _top_statements(getattr(node, inner, []))
        for handler in getattr(node, "handlers", []):
            yield from _top_statements(handler.body)


def _all_of(tree: ast.Module) -> Optional[list[str]]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return None


def _class_binds(node: ast.ClassDef, name: str) -> bool:
    for item in ast.walk(node):
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and item.name == name:
            return True
        if isinstance(item, (ast.Name, ast.Attribute)):
            if getattr(item, "id", None) == name or getattr(item, "attr", None) == name:
                return True
    return False


def name_exists(dotted: str) -> bool:
    """Whether ``q2_plugins.x.y[.z]`` is a module, a name a module binds at its top, or a class's attribute."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(".".join(parts[:cut]))
        if module is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        bound = _bound(module)
        if rest[0] not in bound:
            return False
        cls = bound[rest[0]]
        return len(rest) == 1 or cls is None or _class_binds(cls, rest[1])
    return False


def _texts() -> Iterator[tuple[str, str]]:
    """(where, text) for each page and each docstring."""
    files, _ = _tracked()
    for f in sorted(files):
        if f == "README.md" or (f.startswith("docs/") and f.endswith(".md")):
            yield f, (ROOT / f).read_text(encoding="utf-8")
        elif f.endswith(".py") and f.split("/")[0] in CODE:
            tree = ast.parse((ROOT / f).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node, clean=False)
                    if doc:
                        yield f"{f}:{getattr(node, 'lineno', 1)}", doc


def _relative_exists(target: str) -> bool:
    """A Sphinx ``.name``: the end of some module's or package's name (``.runner.MetaEvalSettings``)."""
    return any(name_exists(package + target) for package in _packages())


def stale_names(text: str) -> list[str]:
    """The paths and names written in ``text`` that do not exist."""
    found = []
    for m in _PATH.finditer(text):
        token = m.group(1)
        placeholder = re.search(r"(^|/)[A-Z]+(\.|/|$)", token)
        if token.startswith((*FOREIGN, "benchmarks/results/")) or placeholder:
            continue  # another project's file, a file a benchmark writes, a placeholder (NAME.py)
        if not path_exists(token):
            found.append(token)
    found += [m.group(0) for m in _DOTTED.finditer(text) if not name_exists(m.group(0))]
    found += [m.group(1) for m in _ROLE.finditer(text) if not _relative_exists(m.group(1))]
    for m in _CONSTANT.finditer(text):
        modules = [f for f in _tracked()[0] if f.endswith(f"/{m.group(1)}.py")]
        if not any(m.group(2) in _bound(ROOT / f) for f in modules):
            found.append(m.group(0).strip("`"))
    return found


def test_every_path_and_name_written_in_the_docs_and_docstrings_exists():
    stale = [f"{where}: {name}" for where, text in _texts() for name in stale_names(text)]
    assert stale == [], "\n".join(["names that do not exist (moved or deleted): fix the text", *stale])


def test_the_name_check_sees_stale_ones():
    text = ("`jobs/ray.py`, `jobs/ray/engine.py`, `metric_names.py`, `q2_plugins/training/recipes/`, "
            "`ray_data.OUTPUT_COLUMNS`, `q2_plugins.components.Resolution`, `q2_plugins.metric.components.Resolution`, "
            "`q2_plugins.io.rows.result_row`, `q2_plugins.metric.signature.model_idd`, "
            ":class:`~q2_plugins.jobs.ScoreJob`, `rows/layout.py`, [a](../q2_plugins/backends/hf/coref.py)")
    assert stale_names(text) == ["jobs/ray.py", "metric_names.py", "q2_plugins/training/recipes/",
                                 "q2_plugins.components.Resolution", "q2_plugins.metric.signature.model_idd",
                                 "ray_data.OUTPUT_COLUMNS"]
    assert stale_names(":mod:`.runner`, :class:`.runner.MetaEvalSettings`, :class:`.data.MetaEvalData`") == [
        ".data.MetaEvalData"]


@pytest.mark.parametrize("package", _packages())
def test_every_package_all_resolves(package):
    """``from package import *`` works: each name of ``__all__`` is an attribute or a sub-module (not imported)."""
    module = importlib.import_module(package)
    missing = [name for name in getattr(module, "__all__", ())
               if not hasattr(module, name) and importlib.util.find_spec(f"{package}.{name}") is None]
    assert missing == [], f"{package}.__all__ names what it does not have: {missing}"


def test_every_module_all_names_what_it_binds():
    """The modules' ``__all__``, read without importing them (some need an optional framework)."""
    wrong = []
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            names = _all_of(ast.parse(path.read_text(encoding="utf-8")))
            package = path.parent if path.name == "__init__.py" else None
            for name in names or ():
                if name not in _bound(path) and not (package and _module_file(
                        str((package / name).relative_to(ROOT)).replace("/", "."))):
                    wrong.append(f"{path.relative_to(ROOT)}: {name}")
    assert wrong == [], "__all__ names what the module does not have:\n" + "\n".join(wrong)
