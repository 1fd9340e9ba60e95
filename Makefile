# The attention lab. `make grade` and `make test` set everything up themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
READY := $(VENV)/.requirements-installed

.PHONY: grade bench test check release solutions student-bundle gradescope clean

# The venv is rebuilt whenever the pinned requirements change.
$(READY): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

## make grade [SUBMISSIONS=dir] [OUT=dir] [JOBS=n] [FORCE=1] [NBGRADER=1]: grade a cohort, write the reports
## (NBGRADER=1 also records the points in nbgrader's gradebook)
grade: $(READY)
	$(PY) -m autograder grade $(if $(SUBMISSIONS),--submissions $(SUBMISSIONS)) $(if $(OUT),--out $(OUT)) \
		$(if $(JOBS),--jobs $(JOBS)) $(if $(FORCE),--force) $(if $(NBGRADER),--nbgrader)

## make bench [N=100] [JOBS=n]: grade N copies of the reference solution and print the timings
bench: $(READY)
	$(PY) -m autograder.bench $(if $(N),--copies $(N)) $(if $(JOBS),--jobs $(JOBS))

## make test: the kit's own tests (solutions score 100, stubs 0, wrong code caught, release clean)
test: $(READY)
	$(PY) -m pytest tests -n auto --maxprocesses=4

## make check [PART=softmax] [SUBMISSION=dir] [VERBOSE=1]: run the checks on a student's modules
check: $(READY)
	$(PY) -m autograder check $(if $(PART),--part $(PART)) $(if $(SUBMISSION),--submission $(SUBMISSION)) \
		$(if $(VERBOSE),--verbose)

## make release: write assignments/ (the student version) from source/
release: $(READY)
	$(PY) -m autograder release

## make solutions: write solutions/ (the reference version) from source/
solutions: $(READY)
	$(PY) -m autograder solutions

## make student-bundle: write dist/attention-student/ and .zip (what students get; no solutions)
student-bundle: $(READY)
	$(PY) -m autograder student-bundle

## make gradescope: write dist/attention-gradescope.zip (setup.sh and run_autograder at its root)
gradescope: $(READY)
	$(PY) -m autograder gradescope-zip

clean:
	rm -rf $(VENV) gradebook.db .pytest_cache
