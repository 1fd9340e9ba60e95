#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image; the zip is
# unpacked in /autograder/source. The pinned packages need Python 3.11.
set -euo pipefail
apt-get update
apt-get install -y --no-install-recommends python3.11 python3.11-venv
cd /autograder/source
python3.11 -m venv .venv
# torch's CPU build from PyTorch's CPU index (its 2.13.0+cpu is preferred to PyPI's 2.13.0, the CUDA build:
# 18 nvidia packages and triton, a 5 GB image for nothing, as Gradescope has no GPU).
.venv/bin/pip install --quiet --disable-pip-version-check --extra-index-url https://download.pytorch.org/whl/cpu \
  -r requirements.txt
# Every upload runs in a fresh copy of this image: bytecode compiled here is not compiled again by each.
.venv/bin/python -m compileall -q autograder source solutions
