#!/usr/bin/env bash
# Wheels the lent H200 lacks for benchmarks/recipes_gpu.py, fetched here into .whl/ (gitignored).
#
# The device machine has Python 3.12 with torch, transformers, accelerate, numpy, pandas,
# safetensors, tokenizers and nvidia-ml-py, and reaches no package registry; LatencyLab's
# engine also needs pydantic(-settings) and, for the CUDA recipes, torchao, optimum-quanto and
# bitsandbytes. ~55 MB in all (bitsandbytes alone is 43 MB), under the 64 MiB a call carries.
#
# Then one device call (timeout 600 s), carrying .whl:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 &&
#   python3 benchmarks/recipes_gpu.py --out $OUT/recipes_gpu.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
rm -rf .whl && mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl \
  pydantic==2.14.4 pydantic-core==2.50.5 pydantic-settings==2.16.3 annotated-types==0.8.0 \
  typing-inspection==0.4.5 python-dotenv==1.2.4 \
  torchao==0.18.0 optimum-quanto==0.2.7 bitsandbytes==0.50.2
du -sh .whl
ls .whl
