"""``q2 hooks``: install / check / remove the start-up hook."""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Optional

from q2_plugins.integrations.hooks import armed, hook_module, install, installed, live, site_dir, uninstall
from q2_plugins.io.outputs import check_writable


def add_parser(sub: argparse._SubParsersAction) -> None:
    h = sub.add_parser("hooks", help="install / check / remove the start-up hook for evaluate.load('q2') and "
                                     "ParlAI's --metrics q2",
                       description="One start-up file (q2_plugins_hook.pth in site-packages) hooks Q² into the "
                                   "frameworks that have no plugin entry point: evaluate (evaluate.load('q2')) and "
                                   "ParlAI (--metrics q2, --q2-* options). It imports nothing until a program "
                                   "imports one of them. Switches: Q2_PLUGINS_EVALUATE_HOOK=0, Q2_PARLAI_HOOK=0.")
    h.add_argument("action", choices=("install", "status", "uninstall"))
    h.add_argument("--target", help="site-packages directory (default: this interpreter's)")
    h.add_argument("--import", dest="import_check", action="store_true",
                   help="status: import each framework in a fresh interpreter and check that it is patched (seconds); "
                        "by default a fresh interpreter checks, without importing them, that the start-up file ran "
                        "and the hook watches their modules")


def run(args: argparse.Namespace) -> int:
    """``q2 hooks ACTION``: install, check or remove the start-up file; returns the exit code."""
    if args.action != "status":
        check_writable(site_dir(args.target), "target", folder=True)
    if args.action == "install":
        print(f"installed {install(args.target)}")
    elif args.action == "uninstall":
        removed = uninstall(args.target)
        print("\n".join(f"removed {p}" for p in removed) if removed else "not installed")
    else:
        return _status(args.target, args.import_check)
    return 0


def _status(target: Optional[str], import_check: bool = False) -> int:
    hook = hook_module()
    path = installed(target)
    print(f"start-up file: {path or 'not installed (q2 hooks install)'}")
    available = [f for f in hook.FRAMEWORKS if importlib.util.find_spec(f) is not None]
    results = (live if import_check else armed)(available, target) if path else {}
    ok = path is not None
    for framework, switch in hook.FRAMEWORKS.items():
        if framework not in available:
            print(f"{framework}: not installed in this interpreter")
            continue
        if hook.switched_off(framework):
            print(f"{framework}: switched off by {switch}={os.environ[switch]}")
            continue
        state = results.get(framework, False)
        print(f"{framework}: {'hooked' if state is True else 'NOT hooked'}"
              + ("" if isinstance(state, bool) else f" ({state})"))
        ok = ok and state is True
    return 0 if ok else 1
