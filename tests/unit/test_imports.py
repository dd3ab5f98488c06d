"""Importing the core is cheap: no torch, transformers, spaCy, ParlAI or lm-eval until a scorer needs them."""

from __future__ import annotations

import subprocess
import sys


def test_core_import_is_light():
    code = (
        "import sys\n"
        "import q2_plugins\n"
        "from q2_plugins import Q2Config, Q2Scorer, Q2Result, score\n"
        "from q2_plugins.cli import build_parser\n"
        "build_parser()\n"
        "heavy = [m for m in ('torch', 'transformers', 'spacy', 'parlai', 'lm_eval', 'evaluate', 'ray')\n"
        "         if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
