"""The shape of the package: short functions, no import loops among its modules, an opt-in taxonomy."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Callable

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "q2_plugins"
LONGEST = 80  # lines of one function, decorators excluded

# functions still longer, each named with its length today: splitting one makes its entry fail until it is removed
STILL_LONG: dict[tuple[str, str], int] = {}


def _modules() -> dict[str, ast.Module]:
    files = sorted(PACKAGE.rglob("*.py"))
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text(encoding="utf-8")) for p in files}


def _long_functions() -> dict[tuple[str, str], int]:
    found = {}
    for path, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > LONGEST:
                    found[(path, node.name)] = length
    return found


def test_no_function_is_longer_than_a_screen():
    assert _long_functions() == STILL_LONG


def _module_name(path: str) -> str:
    parts = ["q2_plugins"] + path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _run_nodes(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node`` but those of an ``if TYPE_CHECKING:`` body (its ``else`` runs, and is kept)."""
    out = []
    for child in ast.iter_child_nodes(node):
        if _type_checking(child):
            for part in child.orelse:  # type: ignore[attr-defined]
                out += [part, *_run_nodes(part)]
            continue
        out += [child, *_run_nodes(child)]
    return out


def _imports(path: str, tree: ast.Module) -> set[str]:
    """The package modules ``path`` imports, at module level or inside functions (an import a function makes when it
    runs closes a loop as surely as one at the top), except under ``if TYPE_CHECKING:`` (never run)."""
    me = _module_name(path)
    package = me if path.endswith("__init__.py") else me.rsplit(".", 1)[0]
    out = set()
    for node in _run_nodes(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("q2_plugins")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            elif (node.module or "").startswith("q2_plugins"):
                target = node.module  # type: ignore[assignment]
            else:
                continue
            out.add(target)
            out |= {f"{target}.{a.name}" for a in node.names}  # `from . import stages` names a module
    return out


def _graph() -> dict[str, list[str]]:
    """Module -> the package modules it imports (a package's ``__init__`` importing its own modules is how it hands
    names on, not an arrow)."""
    trees = _modules()
    names = {_module_name(p): p for p in trees}
    graph = {name: sorted(m for m in _imports(path, trees[path]) if m in names and m != name)
             for name, path in names.items()}
    return {name: [m for m in deps if not (path.endswith("__init__.py") and m.startswith(name + "."))]
            for (name, deps), path in zip(graph.items(), names.values())}


def test_no_import_loop_among_the_modules():
    graph = _graph()
    loops, state = [], {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for dep in graph[name]:
            if state.get(dep) == "open":
                loops.append(trail[trail.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, trail + [dep])
        state[name] = "done"

    for name in graph:
        if name not in state:
            visit(name, [name])
    assert loops == []


@pytest.mark.parametrize("label", [False, True])
def test_the_taxonomy_is_imported_only_when_labels_are_asked_for(label):
    code = (
        "import sys\n"
        "sys.path.insert(0, 'tests/unit/metric')\n"
        "from test_taxonomy import KNOW, RESPONSES, scripted\n"
        "sys.modules.pop('q2_plugins.metric.taxonomy', None)\n"
        f"scripted().score(responses=RESPONSES, knowledge=[KNOW] * 5, label={label})\n"
        "print('q2_plugins.metric.taxonomy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    assert out.stdout.strip() == str(label)


def test_a_response_goes_forward_through_the_scorer():
    """Traced over one ``score(..., label=True)`` with cache and explanations: the steps (metric/stages.py) never call
    back into the scorer, and the scorer itself calls only the steps, their runner and helpers, not the components."""
    from tests.fakes import scripted_scorer

    response, knowledge = "Ann sang in Paris.", "Ann sang in Paris last year."
    scorer = scripted_scorer({response: ["Ann", "Paris"]},
                             {("Ann", response): ["who sang?"], ("Paris", response): ["where did she sing?"]},
                             {("who sang?", response): "Ann", ("where did she sing?", response): "Paris",
                              ("who sang?", knowledge): "Ann", ("where did she sing?", knowledge): "Paris"})
    scorer.score(responses=[response], knowledge=[knowledge], label=True)  # (what loads lazily loads untraced)
    root, back, called = str(PACKAGE), [], set()

    def module(frame) -> str | None:
        name = frame.f_code.co_filename
        return name[len(root) + 1:].removesuffix(".py") if name.startswith(root) else None

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_back is not None:
            callee, caller = module(frame), module(frame.f_back)
            if caller == "metric/stages" and callee == "scorer":
                back.append(frame.f_code.co_name)
            if caller == "scorer" and callee not in (None, "scorer"):
                called.add(callee)

    sys.setprofile(profile)
    try:
        res = scorer.score(responses=[response], knowledge=[knowledge], explain=True, label=True)
    finally:
        sys.setprofile(None)
    assert res.responses[0].score == 1.0 and res.responses[0].label is not None  # (the whole way was taken)
    assert back == []
    assert "metric/stages" in called and called <= {f"metric/{m}" for m in (
        "stages", "runner", "budgets", "config", "signature", "cache", "results")}


def _argparse_uses(tree: ast.Module) -> list[str]:
    """Where a module imports argparse, defines or calls ``add_parser``, or names a ``Namespace``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            found.append(f"line {node.lineno}: import argparse")
        elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
            found.append(f"line {node.lineno}: from argparse import")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "add_parser":
            found.append(f"line {node.lineno}: def add_parser")
        elif isinstance(node, ast.Attribute) and node.attr in ("add_parser", "Namespace"):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id == "Namespace":
            found.append(f"line {node.lineno}: Namespace")
    return found


def test_argparse_lives_only_under_the_cli_package():
    """The library takes typed options; flags, sub-parsers and parsed namespaces belong to q2_plugins/cli/."""
    outside = {path: uses for path, tree in _modules().items()
               if not path.startswith("cli/") and (uses := _argparse_uses(tree))}
    assert outside == {}
    assert _argparse_uses(_modules()["cli/__init__.py"])  # the check sees argparse where it is


def test_each_command_module_owns_its_command():
    """cli/__init__.py builds the parser and dispatches; every command runs from its own module."""
    from q2_plugins import cli

    tree = _modules()["cli/__init__.py"]
    assert {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} == {"build_parser", "flag_of", "main"}
    assert {f.__module__ for f in cli.COMMANDS.values()} == {
        f"q2_plugins.cli.{name}" for name in ("score", "replay", "report", "models", "metaeval", "perturb", "train",
                                              "hooks", "compare", "export", "precision")}


def test_imports_made_inside_functions_count_and_type_checking_ones_do_not():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..metric.config import Q2Config\n"
                     "else:\n    from ..io.outputs import meta_path\n"
                     "def run():\n    if True:\n        from .recipes import run_recipe\n"
                     "    import q2_plugins.metric.cache\n")
    found = _imports("training/perturb.py", tree)
    assert {"q2_plugins.training.recipes", "q2_plugins.metric.cache", "q2_plugins.io.outputs"} <= found
    assert "q2_plugins.metric.config" not in found


def _reaches(graph: dict[str, list[str]], start: str, goal: Callable[[str], bool], avoid: Callable[[str], bool]
             ) -> bool:
    """Whether some import path from ``start`` reaches a module where ``goal`` holds, through none where ``avoid``
    does."""
    seen, todo = {start}, [start]
    while todo:
        for dep in graph[todo.pop()]:
            if goal(dep):
                return True
            if dep not in seen and not avoid(dep):
                seen.add(dep)
                todo.append(dep)
    return False


def _arrows_back_up(graph: dict[str, list[str]]) -> list[str]:
    """Arrows from a module inside a subpackage to a module outside it that imports the subpackage back (directly or
    through modules outside it): the subpackage and that module lean on each other, so neither is a floor below."""
    packages = {name for name in graph if (PACKAGE / "/".join(name.split(".")[1:]) / "__init__.py").is_file()}
    found = []
    for sub in sorted(packages - {"q2_plugins"}):
        def inside(m: str, sub: str = sub) -> bool:
            return m == sub or m.startswith(sub + ".")
        for name in filter(inside, graph):
            for dep in graph[name]:
                if not inside(dep) and _reaches(graph, dep, inside, inside):
                    found.append(f"{name} -> {dep}")
    return found


def test_no_arrow_runs_back_up_out_of_a_subpackage():
    assert _arrows_back_up(_graph()) == []


def test_the_arrow_check_sees_a_subpackage_and_a_module_that_lean_on_each_other():
    graph = {"q2_plugins.backends": [], "q2_plugins.backends.hf": ["q2_plugins.coref"],
             "q2_plugins.coref": ["q2_plugins.backends.loading"], "q2_plugins.backends.loading": [],
             "q2_plugins.metric.config": []}
    assert _arrows_back_up(graph) == ["q2_plugins.backends.hf -> q2_plugins.coref"]
    graph["q2_plugins.coref"] = ["q2_plugins.metric.config"]
    assert _arrows_back_up(graph) == []


def test_datasets_never_import_the_meta_evaluation():
    """The data sets are read for meta-evaluation and training alike: their types live in ``datasets.types``."""
    graph = _graph()
    found = [f"{name} -> {dep}" for name, deps in graph.items() if name.startswith("q2_plugins.datasets")
             for dep in deps if dep.startswith("q2_plugins.metaeval")]
    assert found == []


#: a transformers model class: Auto* models, *For<Task>, *LMHeadModel, *PreTrainedModel, *Model
_MODEL_CLASS = re.compile(r"^AutoModel\w*$|For[A-Z]\w*$|LMHeadModel$|PreTrainedModel$|^\w+Model$")


def _model_class_imports(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "transformers":
            found += [f"line {node.lineno}: {a.name}" for a in node.names if _MODEL_CLASS.search(a.name)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "transformers" and _MODEL_CLASS.search(node.attr):
            found.append(f"line {node.lineno}: transformers.{node.attr}")
    return found


def test_only_backends_import_transformers_model_classes():
    """Which code computes a role and how it loads (the one load policy) is the backends' business."""
    outside = {path: uses for path, tree in _modules().items()
               if not path.startswith("backends/") and (uses := _model_class_imports(tree))}
    assert outside == {}
    assert _model_class_imports(ast.parse("from transformers import AutoModelForCausalLM, AutoTokenizer\n"
                                          "m = transformers.T5ForConditionalGeneration\n")) == [
        "line 1: AutoModelForCausalLM", "line 2: transformers.T5ForConditionalGeneration"]


def _built_flags(tree: ast.Module) -> list[str]:
    """Where a module builds command-line flag text: ``f"--{...}"``, ``"--" + ...`` or ``name.replace("_", "-")``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            found += [f"line {node.lineno}: f-string --{{...}}" for a, b in zip(parts, parts[1:])
                      if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and re.search(r"(?<![\w-])--$", a.value) and isinstance(b, ast.FormattedValue)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Constant) \
                and node.left.value == "--":
            found.append(f"line {node.lineno}: \"--\" + ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace" \
                and [getattr(a, "value", None) for a in node.args] == ["_", "-"]:
            found.append(f"line {node.lineno}: .replace(\"_\", \"-\")")
    return found


def test_no_flag_text_is_built_in_the_library():
    """A library error names its setting (``.setting``); only a front end turns it into a flag."""
    outside = {path: uses for path, tree in _modules().items()
               if not path.startswith("cli/") and (uses := _built_flags(tree))}
    assert outside == {}
    assert len(_built_flags(ast.parse('a = f"--{s} {p}"\nb = "--" + s\nc = s.replace("_", "-")\n'))) == 3


# -- the rooms (the layout of docs/development.md's "Where things live") ------------------------------------------
#: the package's top level: the face, the scorer and one folder per concept
TOP_LEVEL = {"__init__.py", "scorer.py", "py.typed", "metric", "backends", "io", "jobs", "datasets", "training",
             "metaeval", "integrations", "cli", "data"}
LONGEST_MODULE = 600  # lines


def test_the_top_level_is_the_face_the_scorer_and_concept_folders():
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert entries == TOP_LEVEL
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "scorer.py"}


def test_no_module_is_over_600_lines():
    long = {path: n for path in _modules() if (n := len((PACKAGE / path).read_text(encoding="utf-8").splitlines()))
            > LONGEST_MODULE}
    assert long == {}


def test_no_python_file_of_the_repository_is_over_600_lines():
    """The adapters, scripts, benchmarks and tests read like the package: no file over a screenful of screens."""
    repo = PACKAGE.parent
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=repo, capture_output=True, text=True, check=True)
    files = [repo / name for name in listed.stdout.splitlines()]
    assert len(files) > 100  # (the repository's files, not an empty listing)
    long = {f.name: n for f in files if f.is_file() and (n := len(f.read_text(encoding="utf-8").splitlines()))
            > LONGEST_MODULE}
    assert long == {}


def _package_imports(path: str, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import of a q2_plugins module in ``path``, relative ones resolved, TYPE_CHECKING ones
    included (a wall holds for annotations too)."""
    me = _module_name(path)
    package = me if path.endswith("__init__.py") else me.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "q2_plugins"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.split(".")[0] == "q2_plugins":
                found += [(node.lineno, f"{module}.{a.name}" if module == "q2_plugins" else module)
                          for a in node.names]
    return found


def _crossing(room: str, allowed: Callable[[str], bool]) -> dict[str, list[str]]:
    return {path: bad for path, tree in _modules().items() if path.startswith(room + "/")
            and (bad := [f"line {n}: {m}" for n, m in _package_imports(path, tree) if not allowed(m)])}


def test_the_metric_imports_only_the_metric():
    """metric/ is Q² in memory: it reads no file and knows no backend, job or front end."""
    assert _crossing("metric", lambda m: m.startswith("q2_plugins.metric") or m == "q2_plugins.__version__") == {}


def test_io_never_imports_the_rooms_that_use_it():
    above = ("jobs", "training", "metaeval", "integrations", "cli")
    assert _crossing("io", lambda m: not any(m.startswith(f"q2_plugins.{r}") for r in above)) == {}


def test_the_walls_see_a_crossing():
    tree = ast.parse("from ..io.outputs import json_line\nfrom . import stages\nimport q2_plugins.jobs.local\n")
    assert _package_imports("metric/x.py", tree) == [(1, "q2_plugins.io.outputs"), (2, "q2_plugins.metric"),
                                                     (3, "q2_plugins.jobs.local")]


#: the frameworks only integrations/ may import (parlai_ext/, outside the package, is ParlAI's own front end)
FRAMEWORKS = ("lm_eval", "evaluate", "parlai", "deepeval", "ragas", "dspy")


def test_only_integrations_import_the_frameworks():
    found = {}
    for path, tree in _modules().items():
        if path.startswith("integrations/"):
            continue
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found.update({f"{path}:{node.lineno}": n for n in names if n.split(".")[0] in FRAMEWORKS})
    assert found == {}


def test_no_module_imports_another_modules_underscore_name():
    found = [f"{path}:{node.lineno} {a.name}" for path, tree in _modules().items() for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("q2_plugins"))
             for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []




def _uncommented_lazy_imports(path: str, source: str) -> list[int]:
    """Lines of the imports of q2_plugins modules made inside functions with no comment saying why: none on the
    import's lines, on a comment line above it, or above the first import of the run of imports it belongs to."""
    tree = ast.parse(source)
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    comments = {t.start[0] for t in tokens}
    above = {t.start[0] for t in tokens if t.line.lstrip().startswith("#")}  # comment lines, not a statement's tail
    package = {n for n, _ in _package_imports(path, tree)}
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            for body in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                if not isinstance(body, list):
                    continue
                first = None
                for statement in body:
                    if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                        first = None
                        continue
                    first = first or statement
                    lines = set(range(statement.lineno, statement.end_lineno + 1))  # type: ignore[operator]
                    if (statement.lineno in package and not comments & lines
                            and {statement.lineno - 1, first.lineno - 1}.isdisjoint(above)):
                        found.append(statement.lineno)
    return sorted(set(found))


def test_every_import_made_inside_a_function_says_why():
    """A package module imported inside a function is a dependency the top of the module does not show: kept only
    where it keeps a light import light (torch, numpy, the opt-in taxonomy ...), with a comment saying so."""
    found = {path: lines for path in _modules()
             if (lines := _uncommented_lazy_imports(path, (PACKAGE / path).read_text(encoding="utf-8")))}
    assert found == {}


def test_the_lazy_import_check_sees_one_without_a_reason():
    source = ("import os\n"
              "def f():\n    from q2_plugins.metric import taxonomy\n"
              "def g():\n    import json\n    from .spans import Mention\n"
              "def h():\n    # (lazy: numpy)\n    from .significance import paired_test\n    from . import stages\n"
              "def k():\n    x = 1  # a comment on another statement\n    from .spans import Mention\n"
              "def m():\n    import torch\n    from .results import Span  # (lazy: torch)\n")
    assert _uncommented_lazy_imports("metric/x.py", source) == [3, 6, 13]


def test_the_spacy_worker_starts_by_its_module_path():
    """The worker is started as ``python -m <module path>``; a wrong path would fail quietly (the caller does the
    work itself), so this starts one and asks it for candidates."""
    from q2_plugins.metric import spacy_worker
    from q2_plugins.metric.config import Q2Config

    worker = spacy_worker._Worker("candidates", Q2Config().spacy_model)
    try:
        worker.send("extract", ["Ann sang in Paris."])
        assert worker.receive() == [{"mentions": [["Ann", 0, 3], ["Paris", 12, 17]]}]  # with their offsets
    finally:
        worker.close()


def test_every_start_up_hook_target_imports():
    """The start-up hook names its patches by string; a wrong one prints one line and patches nothing."""
    import importlib

    import _q2_plugins_hook

    for framework, where in _q2_plugins_hook.TARGETS.values():
        module, _, function = where.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), (framework, where)


def test_every_built_in_backend_target_imports():
    import importlib

    from q2_plugins import backends

    for scheme, target in backends._REGISTRY.items():
        if isinstance(target, str):
            module, _, attribute = target.partition(":")
            assert getattr(importlib.import_module(module), attribute) is not None, scheme
