# Set-up and checks. `make demo` and `make test` work on a fresh machine with Python 3.11+.
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch; on a machine with the PyTorch CPU index reachable you may prefer
#   make TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu" setup
TORCH_SPEC ?= torch==2.13.0
DEMO_OUT ?= demo-out

.PHONY: setup demo test lint workflows check clean docker-engine vllm-cpu

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_SPEC)
	$(PY) -m pip install --quiet -e '.[collector,dev]'
	touch $@

demo: setup
	rm -rf $(DEMO_OUT)
	$(VENV)/bin/collectbot demo --out $(DEMO_OUT)

# The image tests need a Docker engine: installed and started here when missing (root or
# password-less sudo). Without one they skip, unless COLLECTBOT_REQUIRE_DOCKER=1 (CI).
docker-engine:
	scripts/docker-engine.sh

test: setup docker-engine
	$(PY) -m pytest -q

# vLLM 0.24.0's config and KV-spec classes on the CPU, beside the venv (about a minute and
# 900 MB the first time): the FP8-KV alignment tests that otherwise skip.
vllm-cpu: setup
	PYTHON=$(PY) scripts/vllm-cpu-env.sh

# ruff (style, security and complexity ceilings), mypy, and import-linter's layer contracts
# ([tool.importlinter] in pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The workflows: zizmor's audit offline (the auditor persona: every finding fixed or
# justified in place), then act's dry run of each workflow on its events.
workflows: setup
	$(VENV)/bin/zizmor --offline --persona=auditor --no-progress .github
	$(PY) -m tests.act_support

check: test lint workflows

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
