# The course's labs (source/<lab>/). `make grade` and `make test` set everything up themselves.
# LAB=<name> picks one lab; without it a command works on every lab (check: the only one).
# The first of python3, python3.13, python3.12, python3.11 that is 3.11 to 3.13 (the versions the kit is tested on).
SUPPORTED_PYTHON := import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))
# Looked for once (:=), not at every use; PYTHON= on the command line or in the environment wins.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(or $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c '$(SUPPORTED_PYTHON)' 2>/dev/null && echo $$p && break; done),python3)
endif
VENV := .venv
PY := $(VENV)/bin/python
READY := $(VENV)/.requirements-installed
COMPILED := $(VENV)/.bytecode-compiled
RUN_READY := $(READY) $(if $(PYTHONDONTWRITEBYTECODE),$(COMPILED))
DEV_READY := $(VENV)/.dev-requirements-installed
LAB_OPTION := $(if $(LAB),--lab $(LAB))

.PHONY: help setup grade grade-container verify merge bench test test-fast check new-lab release solutions student-bundle gradescope-zip clean
.DEFAULT_GOAL := help

## make help: these commands, one line each
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

# The venv is rebuilt whenever the pinned requirements change. uv (pinned) installs them: pip took about
# 55 s of a fresh clone's `make test`, uv 18 s. uv reads none of pip's settings, so a wheel folder given to
# pip (PIP_FIND_LINKS) is passed on; where uv cannot run, pip installs.
UV_VERSION := 0.13.9
# torch's CPU build: PyPI's torch for Linux is the CUDA build (18 nvidia packages and triton beside it, a 5 GB
# .venv); PyTorch's CPU index serves the CPU build. Where a wheel folder is given to pip (PIP_FIND_LINKS), its
# torch is used instead, and PyTorch's index is not asked (such machines may not reach it).
TORCH_SOURCE_UV := $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS),--torch-backend cpu)
TORCH_SOURCE_PIP := $(if $(PIP_FIND_LINKS),,--extra-index-url https://download.pytorch.org/whl/cpu)
$(READY): requirements.txt
	@$(PYTHON) -c '$(SUPPORTED_PYTHON)' 2>/dev/null || { echo "error: the kit needs Python 3.11, 3.12 or 3.13;" \
	  "$(PYTHON) is $$($(PYTHON) --version 2>&1): install one and name it (make ... PYTHON=python3.12)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	( $(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) \
	  && $(VENV)/bin/uv pip install --quiet --python $(PY) \
	     $(TORCH_SOURCE_UV) -r requirements.txt ) \
	|| $(PY) -m pip install --quiet --disable-pip-version-check $(TORCH_SOURCE_PIP) -r requirements.txt
	$(PY) -c "$$DROP_WRITTEN_LIBRARIES" $(VENV)
	touch $@

# Just written by the installer, torch's libraries stay in the page cache as written: each process that imports
# torch then maps ~60 MiB more of libtorch_cpu.so (298 MiB resident against 236), which every fork of a judge, zygote
# or worker copies and every exit tears down (300 forks of such a process: 1.8-2.0 CPU-s in the children against
# 1.5-1.7; a fresh clone's make test 373-390 s against 342-354 s in an older checkout, on Linux 6.18). Written back
# and dropped from the page cache, they are read again from disk as any installed file is. Nothing where the
# system lacks posix_fadvise (macOS).
define DROP_WRITTEN_LIBRARIES
import os, pathlib, sys
if hasattr(os, "posix_fadvise"):
    for path in pathlib.Path(sys.argv[1]).rglob("*.so*"):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
endef
export DROP_WRITTEN_LIBRARIES

# Python writes a module's bytecode when it is first imported; where PYTHONDONTWRITEBYTECODE forbids that, the
# kit's commands run on a .venv compiled up front (else every judge would compile torch again): 18 s on 2 cores,
# 4 s once make test (which writes bytecode lazily, below) has run. compileall's exit status is not checked:
# torch ships a module only Python 3.12 parses (torch/testing/_internal/py312_intrinsics.py), never imported here.
$(COMPILED): $(READY)
	$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	touch $@

## make setup: create .venv with the pinned packages (every command does it on first use)
setup: $(RUN_READY)

COHORT_OPTIONS := $(LAB_OPTION) $(if $(SUBMISSIONS),--submissions $(SUBMISSIONS)) $(if $(OUT),--out $(OUT)) \
	$(if $(NBGRADER),--nbgrader)
# Only for code you trust: grade where student code's files cannot be confined (every report says so, in red).
CONFINEMENT_OPTION := $(if $(NO_CONFINEMENT),--no-confinement)

## make grade [LAB=name] [SUBMISSIONS=dir] [OUT=dir] [JOBS=n] [FORCE=1] [NBGRADER=1] [SHARD=i/N] [REPEAT=n] [STRIP_PREFIX=p]
## [DEBUG=1] [NO_CONFINEMENT=1]:
## grade a cohort, lab by lab, write the reports (NBGRADER=1 also records the points in nbgrader's gradebook; SHARD=i/N
## grades slice i of N; REPEAT=n grades it n times and names the checks whose verdict changes; DEBUG=1 keeps each lane's
## log in OUT/<lab>/.debug/; NO_CONFINEMENT=1 grades where the sandbox cannot confine files, for code you trust)
grade: $(RUN_READY)
	$(PY) -m autograder grade $(COHORT_OPTIONS) $(if $(JOBS),--jobs $(JOBS)) $(if $(FORCE),--force) \
		$(if $(SHARD),--shard $(SHARD)) $(if $(REPEAT),--repeat $(REPEAT)) $(if $(STRIP_PREFIX),--strip-prefix $(STRIP_PREFIX)) \
		$(if $(DEBUG),--debug) $(CONFINEMENT_OPTION)

## make verify [LAB=name] [SUBMISSIONS=dir] [OUT=dir] [STUDENTS="a b"] [REPEAT=n] [STRIP_PREFIX=p]: grade the submissions behind OUT again
## and say, per student, whether today's grade is the recorded one (exit status 1 when one differs)
verify: $(RUN_READY)
	$(PY) -m autograder verify $(LAB_OPTION) $(if $(SUBMISSIONS),--submissions $(SUBMISSIONS)) $(if $(OUT),--out $(OUT)) \
		$(if $(STUDENTS),--students $(STUDENTS)) $(if $(REPEAT),--repeat $(REPEAT)) $(if $(JOBS),--jobs $(JOBS)) \
		$(if $(STRIP_PREFIX),--strip-prefix $(STRIP_PREFIX)) $(CONFINEMENT_OPTION)

## make grade-container [the variables of make grade] [IMAGE=name] [DRY_RUN=1]: make grade inside the kit's container
## (Docker or Podman), as root there: the whole sandbox on macOS, Windows or Linux without root (DRY_RUN=1 prints
## the engine's commands)
grade-container:
	deploy/container/grade.sh $(if $(DRY_RUN),--dry-run)

## make merge SHARDS="dir ..." [LAB=name] [SUBMISSIONS=dir] [OUT=dir] [NBGRADER=1]: join the outputs of make grade SHARD=i/N
## into one course's reports, as one run writes them
merge: $(RUN_READY)
	$(PY) -m autograder merge $(COHORT_OPTIONS) $(SHARDS)

## make bench [LAB=name] [N=100] [JOBS=n]: per lab, grade N copies of the reference solution and the demo cohort
## cycled to N, and 20 copies with their notebook beside nbgrader's autograde; print the timings
bench: $(RUN_READY)
	$(PY) -m autograder bench $(LAB_OPTION) $(if $(N),--copies $(N)) $(if $(JOBS),--jobs $(JOBS))

# The linter only the kit's own checks need: not in requirements.txt, which bundles ship.
$(DEV_READY): requirements-dev.txt $(READY)
	$(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements-dev.txt 2>/dev/null \
	|| $(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# One test worker more than the cores, at most 4: the suite waits on purpose (hangs sleep through their time-outs,
# a lab's 11 s call), and a third worker on 2 cores fills those waits (7 min 3 s -> 6 min 26 s; a fourth: 7 min 2 s).
# nproc counts the cores this process may use (an affinity mask, a container's cpuset); macOS has getconf only.
TEST_WORKERS = $(shell cores=$$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1); \
	echo $$(( cores + 1 > 4 ? 4 : cores + 1 )))

## make test: the linter, then the kit's own tests (solutions score 100, stubs 0, wrong code caught, release clean)
test: $(DEV_READY) $(COMPILED)
	$(PY) -m ruff check .
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist loadgroup

# The kit's tests write bytecode as Python does by default (a module compiled by the first process that imports
# it: a judge's clean process too), even where PYTHONDONTWRITEBYTECODE is set. make test compiles .venv up front all
# the same: lazily, the test workers and the lanes they start at once compiled torch's modules side by side, several
# times over (paired, 2 cores, a .venv without bytecode: compiled first 366.8 s in all, pytest 353.9 s; lazily
# 372.9 s, pytest 371.9 s).
test test-fast: export PYTHONDONTWRITEBYTECODE :=

## make test-fast: the unit tests, in seconds (nothing graded, no browser, notebook or process): after every change
test-fast: $(DEV_READY)
	$(PY) -m ruff check .
	$(PY) -m pytest tests -m "not slow" -n auto --maxprocesses=4

## make check [LAB=name] [PART=part] [SUBMISSION=dir] [VERBOSE=1]: run the checks on a student's modules
check: $(RUN_READY)
	@$(PY) -m autograder check $(LAB_OPTION) $(if $(PART),--part $(PART)) $(if $(SUBMISSION),--submission $(SUBMISSION)) \
		$(if $(VERBOSE),--verbose) $(CONFINEMENT_OPTION)

## make new-lab LAB=name PARTS=a,b[,...] [TITLE="..."]: write source/<name>/, a lab that already grades (placeholders)
new-lab: $(RUN_READY)
	$(PY) -m autograder new-lab $(LAB) --parts $(PARTS) $(if $(TITLE),--title "$(TITLE)")

## make release [LAB=name]: write assignments/<lab>/ (the student version) from source/
release: $(RUN_READY)
	$(PY) -m autograder release $(LAB_OPTION)

## make solutions [LAB=name]: write solutions/<lab>/ (the reference version) from source/
solutions: $(RUN_READY)
	$(PY) -m autograder solutions $(LAB_OPTION)

## make student-bundle [LAB=name]: write dist/<lab>-student/ and .zip (what students get; no solutions)
student-bundle: $(RUN_READY)
	$(PY) -m autograder student-bundle $(LAB_OPTION)

## make gradescope-zip [LAB=name]: write dist/<lab>-gradescope.zip (setup.sh and run_autograder at its root)
gradescope-zip: $(RUN_READY)
	$(PY) -m autograder gradescope-zip $(LAB_OPTION)

clean:
	rm -rf $(VENV) gradebook.db .pytest_cache
