"""The one import hook of q2-plugins: frameworks without a plugin entry point get Q² right after they load.

``q2 hooks install`` writes ``q2_plugins_hook.pth`` into site-packages (the wheel ships the same file). Python's
``site`` runs its one line at start-up; the line calls :func:`install`, which imports nothing and puts one finder
first on ``sys.meta_path``. The finder ignores every import except the modules of :data:`TARGETS` (and
:data:`QUIET_LOADS`); when a program imports one of them, the finder lets the module load as usual, then runs the
target's patch on it:

==========================  ======================================================  ============================
module                      patch (run right after the module has loaded)            switched off by
==========================  ======================================================  ============================
``evaluate.loading``        ``evaluate.load("q2")`` finds the shipped module         ``Q2_PLUGINS_EVALUATE_HOOK``
``parlai.core.params``      ParlAI scripts get the ``--q2-*`` options                ``Q2_PARLAI_HOOK``
``parlai.core.teachers``    teachers get ``--metrics q2``                            ``Q2_PARLAI_HOOK``
==========================  ======================================================  ============================

One framework warning is left out while its module loads (:data:`QUIET_LOADS`): ParlAI 1.7.2's
``parlai.core.opt`` imports ``pkg_resources``, whose deprecation warning (setuptools 81) tells a ParlAI user nothing
they can act on; only that message, only while that module runs, and only with the ParlAI hook on.

Cost: start-up imports no module (not even ``typing``: the annotations here are strings) and adds well under 2 ms
(``benchmarks/hook_startup.py``); a process that imports none of the targets pays one set lookup per import.
Safety: nothing here raises and nothing here warns (so ``python -W error`` runs as without the hook): the patch
runs with warnings ignored, and a patch that fails writes one line to standard error and leaves the framework as it
was; the ``.pth`` line does nothing when this module is gone
(a left-over file after an uninstall stays silent). A switch set to ``0``, ``false``, ``no`` or ``off`` (any case)
turns its targets off.
"""

import os  # (already loaded by site at start-up, as is sys)
import sys

__all__ = ["TARGETS", "QUIET_LOADS", "PTH_NAME", "PTH_LINE", "FRAMEWORKS", "install", "enable", "switched_off",
           "patched"]

PTH_NAME = "q2_plugins_hook.pth"
# The .pth line: site executes lines that start with "import"; the try keeps start-up silent if this module is gone.
PTH_LINE = ('import sys; exec("try:\\n    import _q2_plugins_hook\\nexcept Exception:\\n    pass\\n'
            'else:\\n    _q2_plugins_hook.install()\\n")\n')

# framework -> environment switch
FRAMEWORKS = {"evaluate": "Q2_PLUGINS_EVALUATE_HOOK", "parlai": "Q2_PARLAI_HOOK"}
# module -> (framework, "module:function" called with the loaded module)
TARGETS: "dict[str, tuple[str, str]]" = {
    "evaluate.loading": ("evaluate", "q2_plugins.integrations.evaluate:patch_loading"),
    "parlai.core.params": ("parlai", "parlai_ext.hook:patch_params"),
    "parlai.core.teachers": ("parlai", "parlai_ext.hook:patch_teachers"),
}

# module -> (framework, start of the warning message left out while the module itself loads)
QUIET_LOADS: "dict[str, tuple[str, str]]" = {
    "parlai.core.opt": ("parlai", "pkg_resources is deprecated as an API"),
}

_OFF = ("0", "false", "no", "off")


def switched_off(framework: str) -> bool:
    """True when the framework's environment switch says off (``0``, ``false``, ``no``, ``off``; any case)."""
    return os.environ.get(FRAMEWORKS[framework], "").strip().lower() in _OFF


def _patch(name: str, module: "object") -> None:
    framework, where = TARGETS[name]
    try:
        import importlib
        import warnings

        module_name, function = where.split(":")
        with warnings.catch_warnings():  # what importing Q² may warn about is not the program's concern
            warnings.simplefilter("ignore")
            getattr(importlib.import_module(module_name), function)(module)
    except Exception as e:  # never break the framework: it then runs without Q²
        try:
            sys.stderr.write(f"q2-plugins: could not hook into {name} ({type(e).__name__}: {e}); Q² is "
                             f"unavailable in {framework} in this run\n")
        except Exception:  # pragma: no cover - no usable standard error
            pass


class _ThenPatch:
    """A module loader that runs the real loader, then the target's patch; anything else goes to the real one."""

    def __init__(self, loader: "object", name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: "object") -> "object":
        return self._loader.create_module(spec)

    def exec_module(self, module: "object") -> None:
        if self._name in QUIET_LOADS:
            import re
            import warnings

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=re.escape(QUIET_LOADS[self._name][1]))
                self._loader.exec_module(module)
        else:
            self._loader.exec_module(module)
        if self._name in TARGETS:
            _patch(self._name, module)

    def __getattr__(self, attr: str) -> "object":
        return getattr(self._loader, attr)


class _Finder:
    """Finds nothing itself: for a watched module it asks the other finders and wraps the loader they return."""

    def __init__(self) -> None:
        self.watched: "set[str]" = set()
        self._resolving: "set[str]" = set()

    def find_spec(self, name: str, path: "object" = None, target: "object" = None) -> "object":
        if name not in self.watched or name in self._resolving:
            return None
        self._resolving.add(name)
        try:
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if hasattr(spec.loader, "exec_module"):
                        spec.loader = _ThenPatch(spec.loader, name)
                    return spec
            return None
        except Exception:
            return None
        finally:
            self._resolving.discard(name)


FINDER = _Finder()


def enable(frameworks: "tuple[str, ...] | None" = None) -> None:
    """Hook the frameworks (default: all) into this interpreter: patch their target modules now if imported, else
    right after they are. Switches are not consulted: an explicit call is a request."""
    chosen = tuple(FRAMEWORKS) if frameworks is None else frameworks
    for name, (framework, _) in TARGETS.items():
        if framework not in chosen:
            continue
        if name in sys.modules:
            if not patched(name):
                _patch(name, sys.modules[name])
        else:
            FINDER.watched.add(name)
    for name, (framework, _) in QUIET_LOADS.items():
        if framework in chosen and name not in sys.modules:
            FINDER.watched.add(name)
    if FINDER.watched and not any(f is FINDER for f in sys.meta_path):
        sys.meta_path.insert(0, FINDER)


def install() -> None:
    """What the ``.pth`` line runs at start-up: :func:`enable` for every framework not switched off. Never raises."""
    try:
        enable(tuple(f for f in FRAMEWORKS if not switched_off(f)))
    except Exception:  # pragma: no cover - never break interpreter start-up
        pass


def patched(name: str) -> bool:
    """True when the target module ``name`` is imported and carries its patch."""
    module = sys.modules.get(name)
    if module is None:
        return False
    probe = {"evaluate.loading": lambda m: m.evaluation_module_factory,
             "parlai.core.params": lambda m: m.ParlaiParser.add_parlai_args,
             "parlai.core.teachers": lambda m: m.FixedDialogTeacher.observe}[name]
    try:
        return bool(getattr(probe(module), "__q2_plugins__", False))
    except Exception:
        return False
