#!/usr/bin/env python
"""Reranking at generation time: per turn, generating 5 candidates against Q² choosing the best of them.

Per turn of real WoW dialogue (the recorded run's responses, ``q2_original_run``):

- **generation**: a random-weight model of BlenderBot-400M-distill's sizes (2 + 12 layers, d_model 1280, 8,008
  tokens) decodes the turn's message with beam 5 and returns its 5 beams, each stopped at the length of the
  recorded response (its tokens in a BPE trained on the WoW / BEGIN text);
- **reranking**: :func:`q2_plugins.integrations.rerank.rerank_batch` over 5 candidates, the recorded response and
  4 light edits of it (a word dropped at the end or the middle, two words swapped, a filler in front), with the
  paper-size random-weight models of ``bench_pipeline.py`` and the recorded run's decisions (a candidate span an
  edit keeps keeps its recorded question and answers), so the filter and the answerer do a real run's work.

Both per turn (one call each) and batched over the turns (one call for all). CPU time (``time.process_time``, all
threads of the process) and wall time; the reranking's CPU time per stage (QA, QG, NLI, spaCy) and the work it did
(QA calls and tokens, QG inputs, NLI pairs). Rows: ``fp32 default`` (full scoring), ``fp32 + early stop``,
``int8 everywhere`` (QA ``onnx:``, QG and NLI ``ct2:``; full scoring) and ``int8 + early stop``; a row whose
backend or setting this installation lacks prints "not available" and why. Early stop: ``rerank_batch(...,
early_stop=True)``, the best candidate found without scoring candidates that can no longer win.

    python benchmarks/bench_rerank.py --turns 4 --json benchmarks/results/bench_rerank_<commit>.json
    python benchmarks/bench_rerank.py --device cuda ...   # a GPU row: fp32 rows only (int8 is a CPU path)

Prints tables and writes JSON. Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.bench_gpu import commit, synchronize  # noqa: E402
from benchmarks.bench_pipeline import (  # noqa: E402
    SUBSETS,
    BenchCandidates,
    BenchNLI,
    BenchQA,
    BenchQG,
    Oracle,
    build_models,
    fixed_length,
    load_workload,
)
from benchmarks.in_range import in_range_questions  # noqa: E402
from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins import Q2Config, Q2Scorer, backends  # noqa: E402
from q2_plugins.integrations.rerank import rerank_batch  # noqa: E402
from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy  # noqa: E402
from scripts.render_docs import render_rerank  # noqa: E402

BLENDERBOT_400M_DISTILL = dict(vocab_size=8008, d_model=1280, encoder_layers=2, decoder_layers=12,
                               encoder_attention_heads=32, decoder_attention_heads=32, encoder_ffn_dim=5120,
                               decoder_ffn_dim=5120, max_position_embeddings=128, normalize_before=True,
                               scale_embedding=True, activation_function="gelu")
BEAMS = 5
STAGES = ("qa", "qg", "nli", "spacy")
# row: (QG, QA, NLI scheme prefixes, early stop)
ROWS: dict[str, tuple[str, str, str, bool]] = {
    "fp32 default": ("", "", "", False),
    "fp32 + early stop": ("", "", "", True),
    "int8 everywhere": ("ct2:", "onnx:", "ct2:", False),
    "int8 + early stop": ("ct2:", "onnx:", "ct2:", True),
}


class Clock:
    """CPU and wall seconds per stage, summed over the calls of one measurement."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)


class Timed:
    """A component whose public methods add their CPU and wall time to ``clock`` under ``stage``."""

    def __init__(self, inner: Any, stage: str, clock: Clock) -> None:
        self.inner, self.stage, self.clock = inner, stage, clock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                synchronize(self.clock.device)
                self.clock.cpu[self.stage] += time.process_time() - c0
                self.clock.wall[self.stage] += time.perf_counter() - t0

        return call


def light_edits(text: str) -> list[str]:
    """Four light edits of a response, distinct from it and from each other: the last word dropped, a middle word
    dropped, two middle words swapped, a filler in front."""
    words = text.split()
    mid = len(words) // 2
    edits = [" ".join(words[:-1]) if len(words) > 3 else text + " ?",
             " ".join(words[:mid] + words[mid + 1:]) if len(words) > 4 else "well , " + text,
             " ".join(words[:mid - 1] + [words[mid], words[mid - 1]] + words[mid + 1:]) if len(words) > 2
             else text + " !",
             "i think " + text]
    out: list[str] = []
    for e in edits:
        while e in out or e == text:
            e += " ."
        out.append(e)
    return out


def add_edits(oracle: Oracle, response: str, edits: Sequence[str]) -> None:
    """The recorded decisions carried to each edit: a candidate span it still holds keeps its recorded question,
    which the filter passes (the answer on the edit is the span) and whose knowledge answer stays."""
    for e in edits:
        kept = [c for c in oracle.cands.get(response, []) if c.lower() in e.lower()]
        oracle.cands[e] = kept
        for c in kept:
            q = oracle.question[(c, response)]
            oracle.question[(c, e)] = q
            oracle.valid[(q, e)] = c


def messages(data: Path) -> dict[str, str]:
    """Response -> the user message it answers (``q2_wow``)."""
    out: dict[str, str] = {}
    for name in SUBSETS:
        with open(data / "q2_wow" / f"{name}.csv", newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                out.setdefault(row["response"], row["message"])
    return out


def generator(tokenizer: Any, device: str) -> Any:
    """BlenderBot-400M-distill's architecture with random weights (seeded), on ``device``."""
    from transformers import BlenderbotConfig, BlenderbotForConditionalGeneration, GenerationConfig

    sizes = dict(BLENDERBOT_400M_DISTILL, vocab_size=max(BLENDERBOT_400M_DISTILL["vocab_size"], len(tokenizer)))
    config = BlenderbotConfig(**sizes, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                              eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.bos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BlenderbotForConditionalGeneration(config).eval().to(device)
    model.generation_config = GenerationConfig(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                                               decoder_start_token_id=tokenizer.bos_token_id)
    return model


def stop_at(lengths: Sequence[int], eos: int) -> Any:
    """A logits processor that ends input ``i``'s beams after exactly ``lengths[i]`` tokens (the end token forced
    then, banned before): random weights never choose to stop, a real generator stops at about a response's length."""
    from transformers import LogitsProcessor

    class StopAt(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            made = input_ids.shape[1] - 1  # the decoder's start token, then the tokens made so far
            for i, n in enumerate(lengths):
                rows = slice(i * BEAMS, (i + 1) * BEAMS)
                if made < n:
                    scores[rows, eos] = -float("inf")
                else:
                    scores[rows, :] = -float("inf")
                    scores[rows, eos] = 0.0
            return scores

    return StopAt()


def generate(model: Any, tokenizer: Any, prompts: Sequence[str], lengths: Sequence[int], device: str) -> dict[str, Any]:
    """One ``generate`` call: beam 5, 5 beams returned per prompt, each prompt's beams ``lengths[i]`` tokens long."""
    from transformers import LogitsProcessorList

    enc = tokenizer(list(prompts), return_tensors="pt", padding=True, truncation=True, max_length=128).to(device)
    synchronize(device)
    c0, t0 = time.process_time(), time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**enc, num_beams=BEAMS, num_return_sequences=BEAMS, do_sample=False,
                             no_repeat_ngram_size=3, max_new_tokens=max(lengths) + 1, early_stopping=True,
                             logits_processor=LogitsProcessorList([stop_at(lengths, tokenizer.eos_token_id)]))
    synchronize(device)
    return {"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0, "tokens": list(lengths),
            "generated_tokens": int((out[:, 1:] != tokenizer.pad_token_id).sum())}


class NotAvailable(Exception):
    """A row this installation cannot run."""


def early_stop_supported() -> bool:
    return "early_stop" in inspect.signature(rerank_batch).parameters


def load_row(row: str, paths: dict[str, Path], device: str, qg_len: int) -> dict[str, Any]:
    """The row's three components (its backends), or :class:`NotAvailable` saying why not."""
    qg_scheme, qa_scheme, nli_scheme, early = ROWS[row]
    if early and not early_stop_supported():
        raise NotAvailable("rerank_batch has no early_stop setting in this installation")
    if device != "cpu" and (qg_scheme or qa_scheme or nli_scheme):
        raise NotAvailable("int8 backends run on the CPU")
    cfg = Q2Config(qg_model=qg_scheme + str(paths["qg"]), qa_model=qa_scheme + str(paths["qa"]),
                   nli_model=nli_scheme + str(paths["nli"]), device=device, precision_check=0)
    comps = {}
    for role in ("qg", "qa", "nli"):
        try:
            comps[role] = backends.load(role, cfg)
        except Exception as e:  # an unknown scheme, a backend whose package is missing: the row, not the run
            said = str(e).replace(str(paths[role]), "MODEL").split("; ")[0]
            raise NotAvailable(f"{role} through {getattr(cfg, role + '_model').replace(str(paths[role]), 'MODEL')}: "
                               f"{type(e).__name__}: {said}") from e
    qg = comps["qg"]
    if hasattr(qg, "runner"):
        qg.runner.generate_overrides = fixed_length(qg_len)
    else:
        qg.generate_overrides = {"min_new_tokens": qg_len, "max_new_tokens": qg_len}
    in_range_questions(qg)
    return comps


def rerank_once(comps: dict[str, Any], nlp: Any, oracle: Oracle, qa_tok: Any, turns: Sequence[dict[str, Any]],
                early: bool, device: str) -> dict[str, Any]:
    """One ``rerank_batch`` call over ``turns``: time, stage split, work, and each turn's best candidate."""
    clock = Clock(device)
    wrappers = {"qg": BenchQG(Timed(comps["qg"], "qg", clock), oracle),
                "qa": BenchQA(Timed(comps["qa"], "qa", clock), oracle),
                "nli": BenchNLI(Timed(comps["nli"], "nli", clock), oracle)}
    scorer = Q2Scorer(Q2Config(precision_check=0, device=device),
                      candidate_extractor=BenchCandidates(Timed(SpacyCandidateExtractor(nlp), "spacy", clock), oracle),
                      question_generator=wrappers["qg"], question_answerer=wrappers["qa"], nli=wrappers["nli"],
                      personal_filter=Timed(SpacyPersonalFilter(nlp), "spacy", clock))
    kwargs = {"early_stop": early} if early_stop_supported() else {}
    synchronize(device)
    c0, t0 = time.process_time(), time.perf_counter()
    ranked = rerank_batch([t["candidates"] for t in turns], [t["knowledge"] for t in turns], scorer=scorer, **kwargs)
    synchronize(device)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    qa_pairs = list(wrappers["qa"].real)
    return {"cpu_s": cpu, "wall_s": wall, "stage_cpu_s": {s: clock.cpu.get(s, 0.0) for s in STAGES},
            "stage_wall_s": {s: clock.wall.get(s, 0.0) for s in STAGES},
            "qa_calls": len(qa_pairs), "qa_tokens": sum(len(qa_tok(q, c)["input_ids"]) for q, c in qa_pairs),
            "qg_inputs": len(wrappers["qg"].real), "nli_pairs": len(wrappers["nli"].real),
            "best": [r.best for r in ranked],
            "stopped": [sum(bool(s) for s in getattr(r, "stopped", None) or []) for r in ranked]}


def make_turns(data: Path, n: int, oracle: Oracle, gen_tok: Any) -> list[dict[str, Any]]:
    said = messages(data)
    turns = []
    for r in load_workload(data, n):
        edits = light_edits(r.response)
        add_edits(oracle, r.response, edits)
        turns.append({"id": r.id, "message": said.get(r.response, ""), "response": r.response,
                      "knowledge": r.knowledge, "candidates": [r.response] + edits,
                      "length": len(gen_tok(r.response, add_special_tokens=False)["input_ids"])})
    return turns


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"))
    ap.add_argument("--sizes", choices=("paper", "tiny"), default="paper",
                    help="tiny: the test-size models (and a tiny generator), to check the script itself quickly")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--turns", type=int, default=4, help="turns (responses of bench_pipeline's workload)")
    ap.add_argument("--qg-length", type=int, default=10, help="generated question length in tokens (default: "
                    "%(default)s, the recorded run's median question in the QG tokenizer)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated, of: " + ", ".join(ROWS))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    data, device = Path(args.data), args.device
    paths = build_models(Path(args.models_dir), data, args.sizes)
    from transformers import AutoTokenizer

    gen_tok = AutoTokenizer.from_pretrained(str(paths["nli"]))  # a byte-level BPE of the WoW text, as BlenderBot's
    qa_tok = AutoTokenizer.from_pretrained(str(paths["qa"]))
    oracle = Oracle(load_workload(data, args.turns))
    turns = make_turns(data, args.turns, oracle, gen_tok)
    nlp = load_spacy("en_core_web_sm")
    report: dict[str, Any] = {
        "benchmark": "bench_rerank", "commit": commit(), "settings": vars(args),
        "machine": {"cpu": cpu_name(), "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
                    "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "torch": torch.__version__, "python": platform.python_version(),
                    "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None},
        "turns": [{k: t[k] for k in ("id", "response", "candidates", "length")} for t in turns],
    }
    model = generator(gen_tok, device) if args.sizes == "paper" else tiny_generator(gen_tok, device)
    prompts, lengths = [t["message"] for t in turns], [t["length"] for t in turns]
    generate(model, gen_tok, prompts[:1], lengths[:1], device)  # warm-up
    report["generation"] = {"per_turn": [generate(model, gen_tok, [p], [n], device) for p, n in zip(prompts, lengths)],
                            "batched": generate(model, gen_tok, prompts, lengths, device)}
    print(f"generation: per turn CPU {[round(g['cpu_s'], 2) for g in report['generation']['per_turn']]} s, "
          f"batched {report['generation']['batched']['cpu_s']:.2f} s", flush=True)
    del model
    report["rows"] = {}
    for row in [r for r in args.rows.split(",") if r]:
        if row not in ROWS:
            ap.error(f"--rows: unknown row {row!r} (known: {', '.join(ROWS)})")
        report["rows"][row] = measure_row(row, paths, device, args.qg_length, nlp, oracle, qa_tok, turns)
    derive(report)
    print(render_rerank(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


def tiny_generator(tokenizer: Any, device: str) -> Any:
    """The generator at test size (``--sizes tiny``: checks the script, measures nothing worth keeping)."""
    global BLENDERBOT_400M_DISTILL
    BLENDERBOT_400M_DISTILL = dict(BLENDERBOT_400M_DISTILL, d_model=32, encoder_layers=1, decoder_layers=1,
                                   encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                   decoder_ffn_dim=64)
    return generator(tokenizer, device)


def measure_row(row: str, paths: dict[str, Path], device: str, qg_len: int, nlp: Any, oracle: Oracle, qa_tok: Any,
                turns: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A row: loaded (an int8 model is converted on its first load, outside the clock), warmed up on the first turn,
    then each turn in its own call and all turns in one call."""
    try:
        t0 = time.perf_counter()
        comps = load_row(row, paths, device, qg_len)
        load_s = time.perf_counter() - t0
    except NotAvailable as e:
        print(f"{row}: not available: {e}", flush=True)
        return {"available": False, "reason": str(e)}
    early = ROWS[row][3]
    rerank_once(comps, nlp, oracle, qa_tok, turns[:1], early, device)  # warm-up
    per_turn = [rerank_once(comps, nlp, oracle, qa_tok, [t], early, device) for t in turns]
    batched = rerank_once(comps, nlp, oracle, qa_tok, turns, early, device)
    print(f"{row}: per turn CPU {[round(p['cpu_s'], 2) for p in per_turn]} s, batched {batched['cpu_s']:.2f} s",
          flush=True)
    return {"available": True, "load_s": load_s, "per_turn": per_turn, "batched": batched}


def derive(report: dict[str, Any]) -> None:
    """Ratios and targets from the measured figures (rerank / generation; int8 + early stop / fp32 default)."""
    gen = report["generation"]
    for r in report["rows"].values():
        if not r["available"]:
            continue
        ratios = [p["cpu_s"] / g["cpu_s"] for p, g in zip(r["per_turn"], gen["per_turn"])]
        r["rerank_over_generation_cpu"] = {"per_turn": ratios, "median": statistics.median(ratios),
                                           "batched": r["batched"]["cpu_s"] / gen["batched"]["cpu_s"]}
        total = sum(p["cpu_s"] for p in r["per_turn"])
        r["cpu_s_per_turn_mean"] = total / len(r["per_turn"])
        r["stage_share"] = {s: sum(p["stage_cpu_s"][s] for p in r["per_turn"]) / total for s in STAGES}
    rows, ref = report["rows"], report["rows"].get("fp32 default", {})
    for name, r in rows.items():
        if not r.get("available") or not ref.get("available"):
            continue
        r["cpu_vs_fp32_default"] = r["cpu_s_per_turn_mean"] / ref["cpu_s_per_turn_mean"]
        r["same_best_as_fp32_default"] = [p["best"] == q["best"] for p, q in zip(r["per_turn"], ref["per_turn"])]
        full = rows.get({"fp32 + early stop": "fp32 default", "int8 + early stop": "int8 everywhere"}.get(name, ""))
        if full and full.get("available"):
            r["work_saved_vs_full"] = {k: 1 - sum(p[k] for p in r["per_turn"]) / max(1, sum(p[k] for p in
                                                                                               full["per_turn"]))
                                       for k in ("qa_calls", "qa_tokens", "qg_inputs", "nli_pairs")}
    best = rows.get("int8 + early stop", {})
    report["targets"] = [
        {"target": "rerank CPU per turn, int8 + early stop / fp32 default", "goal": "<= 0.33, same best",
         "measured": best.get("cpu_vs_fp32_default"),
         "same_best": all(best["same_best_as_fp32_default"]) if best.get("available") and ref.get("available")
         else None},
        {"target": "rerank / generation CPU per turn (median), best row", "goal": "<= 2x",
         "measured": min((r["rerank_over_generation_cpu"]["median"] for r in rows.values() if r.get("available")),
                         default=None)},
    ]


if __name__ == "__main__":
    sys.exit(main())
