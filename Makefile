# Two commands on a fresh machine: `make demo` and `make test`.
# The venv pins the CPU build of torch that installs quickly here; pyproject.toml stays permissive.
# uv installs what pip would, from pip's own sources, in a third of pip's time (scripts/uv_install.py).
VENV      ?= .venv
# The venv's interpreter: the system's python3.11 where there is one, else python3. Debian's
# and Ubuntu's are built with profile-guided and link-time optimisation, pyenv's default build
# is not: the suite takes about a fifth less CPU (docs/architecture.md, "The test suite").
PYTHON    ?= $(firstword $(wildcard /usr/bin/python3.11) python3)
TORCH_PIN ?= torch==2.13.0
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.mha-kit-installed
# The kit's bytecode, written ahead: where PYTHONDONTWRITEBYTECODE is set (as here and on CI),
# every process that imports the kit (grader, worker, kernel) would compile it again.
BYTECODE  := $(BIN)/python -m compileall -q mha_kit
# Test processes; the tests that share a fixture built once stay together (tests/conftest.py).
# Three on two cores: the nbgrader course waits on kernels half its time, and a third process
# fills it (docs/architecture.md, "The test suite").
JOBS      ?= 3

.PHONY: demo test lab lint release clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV) && python3 -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/python scripts/uv_install.py --quiet "$(TORCH_PIN)" -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

demo: $(STAMP)
	$(BYTECODE)
	$(BIN)/mha-kit check solutions/mha/multi_head_attention.ipynb

# pytest exits 5 when it collects no tests: that is a broken suite, and said so.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BYTECODE)
	$(BIN)/python -m pytest -n $(JOBS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; \
	exit $$status

# Open the notebooks in JupyterLab, with the kit installed (self-learners: start here).
lab: $(STAMP)
	$(BYTECODE)
	$(BIN)/jupyter lab assignments/

lint: $(STAMP)
	$(BIN)/ruff check .

# Regenerate the student releases in assignments/ from solutions/ with nbgrader.
release: $(STAMP)
	$(BIN)/mha-kit release

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
