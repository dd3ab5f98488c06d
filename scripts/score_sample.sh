#!/usr/bin/env bash
# Set up .venv with what scoring needs, score the bundled sample (12 WoW responses) with explanations and replay the bundled slice of a
# recorded original run; both write an HTML report under out/.
#   bash scripts/score_sample.sh                  # the paper's models (Hugging Face hub, or HF_HUB_OFFLINE=1 + cache)
#   Q2_MODELS=DIR bash scripts/score_sample.sh    # models saved by `q2 prefetch --output-dir DIR`
#   bash scripts/score_sample.sh --random-models  # no weights at hand: tiny random-weight models built locally in
#                                                 # out/examples (also the README examples' working directory).
#                                                 # Exercises the real code path; the scores mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
# only what scoring needs (the package, torch, spaCy): the first score comes in a minute or two. The extras the
# other examples use (ParlAI, evaluate, lm-eval, Ray, ...) are a separate command: bash scripts/setup.sh
Q2_EXTRAS="" Q2_PARLAI=0 Q2_BROWSER=0 Q2_LIGHTEVAL=0 Q2_APPS=0 Q2_COMPILE=0 bash scripts/setup.sh
mkdir -p out
ARGS=()
if [ "${1:-}" = "--random-models" ]; then
  [ -d out/examples/q2-models ] || .venv/bin/q2 make-test-models --examples out/examples
  Q2_MODELS=out/examples/q2-models
fi
if [ -n "${Q2_MODELS:-}" ]; then
  ARGS+=(--qg-model "$Q2_MODELS/qg" --qa-model "$Q2_MODELS/qa" --nli-model "$Q2_MODELS/nli")
fi
# Real questions and answers without weights (first, so a machine without models still gets them): replay the
# slice of a recorded original run bundled with the package.
SLICE=q2_plugins/data/original_run_slice
.venv/bin/q2 replay --steps "$SLICE"/*_out.steps.csv --scores "$SLICE"/*_scores.csv --explain \
  --output out/original_run_replay.jsonl --html out/original_run_replay.html
echo "HTML report of real Q² questions and answers (replayed, no models): out/original_run_replay.html"
.venv/bin/q2 score --input q2_plugins/data/sample.jsonl --history-column history --output out/sample_scores.jsonl \
  --explain --html out/sample_scores.html "${ARGS[@]}"
echo "per-response results with questions and answers: out/sample_scores.jsonl (report: out/sample_scores.html)"
# the set-up skipped byte-compiling to reach the first score sooner: done now, once, so later runs start fast
.venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  > /dev/null 2>&1 || true
if [ "${1:-}" = "--random-models" ]; then
  echo "the README's examples run in out/examples (tiny random-weight models, meaningless scores):"
  echo "  source .venv/bin/activate; cd out/examples"
fi
echo "the examples of ParlAI, evaluate, lm-eval, Ray and the tests need the extras: bash scripts/setup.sh"
