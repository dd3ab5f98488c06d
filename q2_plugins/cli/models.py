"""``q2 prefetch`` and ``q2 make-test-models``: models onto a machine, the configured ones (for an offline
machine) or tiny random-weight ones (for smoke runs and the documented examples)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from q2_plugins import backends
from q2_plugins.cli._common import DefaultsHelp, add_config_flags
from q2_plugins.io.outputs import check_writable
from q2_plugins.metric.config import MODEL_KINDS, config_from_args
from q2_plugins.metric.signature import model_id

__all__ = ["add_parsers", "prefetch", "make_test_models"]


def add_parsers(sub: Any) -> None:
    """Add the ``make-test-models`` and ``prefetch`` sub-commands to ``sub`` (the ``q2`` sub-parsers)."""
    t = sub.add_parser("make-test-models",
                       help="build tiny RANDOM-weight QG/QA/NLI models (offline smoke runs; scores are meaningless)")
    where = t.add_mutually_exclusive_group(required=True)
    where.add_argument("--output-dir", help="write DIR/qg, DIR/qa, DIR/nli and DIR/coref (coreference)")
    where.add_argument("--examples", metavar="DIR",
                       help="lay DIR out as the documented examples expect: q2-models/{qg,qa,nli,coref}, "
                            "my-dialogue-model "
                            "(causal LM), my-seq2seq-model (T5), metrics/response_length (an evaluate module)")

    f = sub.add_parser("prefetch", help="download the configured models into a directory, for offline machines",
                       formatter_class=DefaultsHelp)
    f.add_argument("--output-dir", required=True, help="where the models go: DIR/qg, DIR/qa, DIR/nli, DIR/coref")
    add_config_flags(f, names=[f"{role}_{what}" for role in (*MODEL_KINDS, "coref") for what in ("model", "revision")])


def prefetch(args: argparse.Namespace) -> int:
    """``q2 prefetch``: each role's model copied by the backend its model string names, then loaded once."""

    config = config_from_args(args)
    check_writable(args.output_dir, "output_dir", folder=True)
    out = Path(args.output_dir)
    for role in (*MODEL_KINDS, "coref"):
        target = backends.prefetch(role, out / role, config)  # it loads: a model that cannot fails here
        print(f"{role}: {getattr(config, f'{role}_model')} -> {target}  (signs as {model_id(str(target))})")
    print(f"On the offline machine: --qg-model {out / 'qg'} --qa-model {out / 'qa'} --nli-model {out / 'nli'}"
          f" (with --coref: --coref-model {out / 'coref'})")
    return 0


def make_test_models(args: argparse.Namespace) -> int:
    """``q2 make-test-models``: the tiny models built, one line per role."""
    from q2_plugins.backends.hf.tiny import build_all, build_examples  # (lazy: torch)

    check_writable(args.examples or args.output_dir, "examples" if args.examples else "output_dir", folder=True)
    paths = build_examples(args.examples) if args.examples else build_all(args.output_dir)
    for role, path in paths.items():
        print(f"{role}: {path}" + ("" if role.startswith("metrics/") else "  (random weights)"))
    return 0
