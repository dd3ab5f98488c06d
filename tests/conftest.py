from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """The reference data: $Q2_SHARED_DATA, else ../shared/data beside the repository (as in CI)."""
    return Path(os.environ.get("Q2_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "q2_original_run").is_dir():
        pytest.fail(f"Reference data not found at {path}: put shared/ beside the repository or set Q2_SHARED_DATA")
    return path


# -- tiny models shared by the adapter tests (built once per session) -------------------------------------------------
@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """Tiny random-weight Q² models (qg / qa / nli) plus a tiny GPT-2 causal LM ("lm") on the NLI model's byte-level
    BPE tokenizer, all loadable with ``from_pretrained``."""
    from q2_plugins.testing import build_all

    paths = build_all(tmp_path_factory.mktemp("tiny-models"))
    paths["lm"] = build_tiny_causal_lm(paths["nli"], paths["nli"].parent / "lm")
    paths["qg_short"] = _short_questions_copy(paths["qg"], paths["qg"].parent / "qg_short")
    return paths


def _short_questions_copy(qg: Path, out: Path) -> Path:
    """A copy of the tiny QG model whose generation config ends questions after a token or two (every odd id, the
    real EOS 1 included, is an end-of-sequence id). Random weights rarely emit the real EOS, so beam search would
    otherwise run to Q²'s 128-token maximum for every candidate; the adapter tests exercise the machinery, not the
    questions. (Every id as EOS breaks beam search: it needs non-final candidates.)"""
    import json
    import shutil

    shutil.copytree(qg, out)
    gen = json.loads((out / "generation_config.json").read_text())
    gen["eos_token_id"] = list(range(1, json.loads((out / "config.json").read_text())["vocab_size"], 2))
    (out / "generation_config.json").write_text(json.dumps(gen))
    return out


def build_tiny_causal_lm(tokenizer_dir: Path, out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=512,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture
def model_workdir(tiny_models, tmp_path, monkeypatch) -> Path:
    """A working directory laid out as the docs assume: ``q2-models/{qg,qa,nli}`` (as ``q2 prefetch`` saves them;
    the QG model stops questions early, see ``_short_questions_copy``),
    ``my-dialogue-model`` (causal LM) and ``my-seq2seq-model`` (T5). The test runs inside it."""
    (tmp_path / "q2-models").mkdir()
    for role, key in (("qg", "qg_short"), ("qa", "qa"), ("nli", "nli")):
        (tmp_path / "q2-models" / role).symlink_to(tiny_models[key], target_is_directory=True)
    (tmp_path / "my-dialogue-model").symlink_to(tiny_models["lm"], target_is_directory=True)
    (tmp_path / "my-seq2seq-model").symlink_to(tiny_models["qg"], target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def doc_blocks():
    """``doc_blocks(tag)``: the runnable examples tagged ``<!-- test: TAG -->`` in README.md and docs/*.md, in that
    order (README first, then the docs files by name)."""
    return lambda tag: [block for path in doc_files() for block in _doc_blocks(path, tag)]


def doc_files() -> list[Path]:
    """README.md, then every page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _doc_blocks(path: Path, tag: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown file preceded by ``<!-- test: TAG -->``: [(language, code)]."""
    import re

    text = path.read_text(encoding="utf-8")
    pattern = rf"<!-- test: {re.escape(tag)} -->\s*\n```(\w+)\n(.*?)\n```"
    return [(m.group(1), m.group(2) + "\n") for m in re.finditer(pattern, text, flags=re.S)]
