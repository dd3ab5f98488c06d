"""What the start-up hook (q2_plugins_hook.pth -> _q2_plugins_hook.install) costs every Python process.

Measured as an installed wheel has it: the module compiled to a .pyc in a scratch directory. Prints, over N fresh
interpreters (median and lower quartile, milliseconds):
- the import of ``_q2_plugins_hook`` plus its ``install()``, timed inside the interpreter (``-S``, with ``os``
  imported first as ``site`` does);
- ``python -c pass`` with the hook against the same start with a stub module whose ``install()`` does nothing;
and which modules the hook's start-up added to ``sys.modules`` (it should add none but itself).

    python benchmarks/hook_startup.py [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import py_compile
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INSIDE = """
import os, sys, time  # (site has imported os before any .pth line runs)
before = set(sys.modules)
t = time.perf_counter()
import _q2_plugins_hook
_q2_plugins_hook.install()
print((time.perf_counter() - t) * 1000, sorted(set(sys.modules) - before - {"_q2_plugins_hook"}))
"""


def _module_dir(root: Path, source: str) -> Path:
    """A directory holding ``_q2_plugins_hook`` (``source``) compiled, as an install would have it."""
    root.mkdir()
    (root / "_q2_plugins_hook.py").write_text(source, encoding="utf-8")
    py_compile.compile(str(root / "_q2_plugins_hook.py"), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return root


def _env(path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(path)}


def _start_ms(path: Path, pth_dir: Path) -> float:
    """One ``python -S`` start that processes only ``pth_dir`` (the .pth) and runs ``pass``, in ms."""
    code = f"import site; site.addsitedir({str(pth_dir)!r})"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-c", code], env=_env(path), check=True)
    return (time.perf_counter() - t) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="q2-hook-bench-"))
    try:
        hook = _module_dir(scratch / "hook", (REPO / "_q2_plugins_hook.py").read_text(encoding="utf-8"))
        stub = _module_dir(scratch / "stub", "def install():\n    pass\n")
        pth = scratch / "site"
        pth.mkdir()
        shutil.copy(REPO / "q2_plugins_hook.pth", pth / "q2_plugins_hook.pth")
        inside, added = [], set()
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-S", "-c", INSIDE], env=_env(hook), check=True,
                                 capture_output=True, text=True).stdout.split(" ", 1)
            inside.append(float(out[0]))
            added.update(eval(out[1]))  # noqa: S307 - a list literal this script printed
        with_hook, with_stub = [], []
        for _ in range(args.runs):  # alternated, so that load on the machine falls on both alike
            with_hook.append(_start_ms(hook, pth))
            with_stub.append(_start_ms(stub, pth))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def show(name: str, xs: list[float]) -> None:
        print(f"{name:<44} median {statistics.median(xs):7.3f} ms   lower quartile "
              f"{statistics.quantiles(xs, n=4)[0]:7.3f} ms   min {min(xs):7.3f} ms")

    print(f"{args.runs} runs, {sys.executable} ({sys.version.split()[0]})")
    show("import _q2_plugins_hook + install()", inside)
    show("python start with the hook", with_hook)
    show("python start with a stub install()", with_stub)
    print(f"difference of the medians: {statistics.median(with_hook) - statistics.median(with_stub):.3f} ms")
    print(f"modules the hook's start-up imported besides itself: {sorted(added) or 'none'}")


if __name__ == "__main__":
    main()
