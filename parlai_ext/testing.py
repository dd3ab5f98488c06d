"""Offline stand-ins for the ParlAI side: a tiny Wizard of Wikipedia data set and tiny trained dialogue models.

:func:`write_wow_data` writes ``<datapath>/wizard_of_wikipedia/`` in the layout ParlAI's WoW teachers read (with
the ``.built`` marker, so nothing is downloaded). :func:`train_tiny_model` trains one of the three model classes the
Q² paper scored, for a handful of steps, into a real ParlAI model file. Their outputs mean nothing; they exercise
the real code paths. Sentences come from :data:`q2_plugins.backends.hf.tiny.CORPUS`, so the tiny Q² models' tokenizers
know the words.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from q2_plugins.backends.hf.tiny import corpus_sentences

__all__ = ["MODELS", "write_wow_data", "train_tiny_model", "TINY_ARCH"]

# -m value of each model class the tests train: transformer/generator, the paper's MemNet, dodecaDialogue.
MODELS = {
    "transformer": "transformer/generator",
    "end2end": "projects.wizard_of_wikipedia.generator.agents:EndToEndAgent",
    "image_seq2seq": "image_seq2seq",
}

TINY_ARCH: dict[str, Any] = dict(
    n_layers=1, n_heads=2, embedding_size=16, ffn_size=32, n_positions=128, truncate=64, label_truncate=12,
    dict_tokenizer="re", dict_lower=True,
)

_TOPICS = ["Paris", "London", "Science", "Music", "Travel", "History"]


def _episode(e: int, wiki: list[str], chat: list[str]) -> dict[str, Any]:
    """An apprentice-first episode of 4 wizard turns; the last turn uses no knowledge (``no_passages_used``)."""
    topic = _TOPICS[e % len(_TOPICS)]
    passage = [wiki[(3 * e + i) % len(wiki)] for i in range(4)]
    dialog = []

    def response(source: str, shift: int) -> str:
        # short (a few training steps teach a tiny model to end it, so beams finish) and varied across episodes
        words = source.split()
        start = shift % max(1, len(words) - 5)
        return " ".join(words[start:start + 6])

    for t in range(4):
        sentence = passage[t]
        used = t < 3
        dialog.append({"speaker": "1_Apprentice", "text": chat[(4 * e + 2 * t) % len(chat)],
                       "retrieved_topics": [topic], "retrieved_passages": [{topic: passage}]})
        dialog.append({
            "speaker": "0_Wizard",
            "text": response(sentence if t % 2 == 0 else chat[(4 * e + 2 * t + 1) % len(chat)], e // 6),
            "retrieved_topics": [topic], "retrieved_passages": [{topic: passage}],
            "checked_sentence": {f"self_{topic}_{t}": sentence} if used else {"no_passages_used": "no_passages_used"},
            "checked_passage": {f"self_{topic}": topic} if used else {"no_passages_used": "no_passages_used"},
            "candidate_responses": [],
        })
    return {"chosen_topic": topic, "chosen_topic_passage": passage, "persona": f"i like {topic.lower()}.",
            "wizard_eval": 5, "dialog": dialog}


def write_wow_data(datapath: str | os.PathLike, n_train: int = 8, n_valid: int = 3) -> Path:
    """Write a tiny WoW data set (``n_valid`` episodes of 4 turns in valid and test) and return its directory."""
    lines = corpus_sentences()
    wiki, chat = lines[:28], lines[28:57]
    out = Path(datapath) / "wizard_of_wikipedia"
    out.mkdir(parents=True, exist_ok=True)
    train = [_episode(e, wiki, chat) for e in range(n_train)]
    valid = [_episode(1000 + e, wiki, chat) for e in range(n_valid)]
    files = {"train.json": train, "valid_random_split.json": valid, "test_random_split.json": valid,
             "valid_topic_split.json": valid, "test_topic_split.json": valid, "data.json": train + valid}
    for name, data in files.items():
        (out / name).write_text(json.dumps(data), encoding="utf-8")
    (out / ".built").write_text("offline tiny data\n1.0", encoding="utf-8")  # version of parlai's wow build.py
    return out


def train_tiny_model(kind: str, model_file: str | os.PathLike, datapath: str | os.PathLike, steps: int = 40) -> str:
    """Train a tiny ``kind`` model (a key of :data:`MODELS`) on the WoW Generator task; returns the model file."""
    import random

    import numpy as np
    import torch
    from parlai.scripts.train_model import TrainModel

    if kind not in MODELS:
        raise ValueError(f"kind must be one of {sorted(MODELS)}, got {kind!r}")
    random.seed(0)  # the same tiny model every time
    np.random.seed(0)
    torch.manual_seed(0)
    TrainModel.main(
        task="wizard_of_wikipedia:Generator", datapath=str(datapath), model=MODELS[kind],
        model_file=str(model_file), batchsize=4, max_train_steps=steps, lr_scheduler="none", optimizer="adam",
        learningrate=0.01,
        validation_every_n_epochs=-1, validation_max_exs=1, num_epochs=100, log_every_n_steps=1000,
        short_final_eval=True, **TINY_ARCH,
    )
    return str(model_file)
