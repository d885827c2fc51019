# MLPerf Inference toolkit. Every target is one call into Python; `make help` lists them.
# Variables: RUN_ARGS, SUBMITTER, MLPERF_SCRATCH_PATH, LOG_DIR, BENCHMARKS, SYSTEM_NAME; for the container targets
# also BASE_IMAGE, NO_BUILD, DOCKER_ARGS, DOCKER_COMMAND, MIG_CONF (documentation/docker.md).

SHELL := /bin/bash
PYTHON_BOOTSTRAP ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.toolkit-deps.sha256

RUN_ARGS ?=
SUBMITTER ?=
MLPERF_SCRATCH_PATH ?=
LOG_DIR ?=
BENCHMARKS ?=
SYSTEM_NAME ?=
BASE_IMAGE ?=
NO_BUILD ?=
DOCKER_ARGS ?=
DOCKER_COMMAND ?=
MIG_CONF ?=

# Make variables reach Python as data, never as shell or make syntax: each one that is set becomes one flag whose
# value is its raw text ($(value ...): make expands nothing in it) in single quotes (a ' in it written '\''),
# and none is exported (make would expand it for the environment). Python splits RUN_ARGS into flags as a shell
# splits words (quotes group, nothing runs) and refuses a setting given twice with different values.
DATA_VARIABLES := RUN_ARGS SUBMITTER MLPERF_SCRATCH_PATH LOG_DIR BENCHMARKS SYSTEM_NAME BASE_IMAGE NO_BUILD DOCKER_ARGS \
	DOCKER_COMMAND MIG_CONF
unexport $(DATA_VARIABLES)
shell_word = '$(subst ','\'',$(value $(1)))'
flag = $(if $(value $(2)),--$(1)=$(call shell_word,$(2)))
MAIN = $(PY) -m code.main --action=$@ $(call flag,scratch_path,MLPERF_SCRATCH_PATH) $(call flag,log_dir,LOG_DIR) \
	$(call flag,submitter,SUBMITTER) $(call flag,benchmarks,BENCHMARKS) $(call flag,system_name,SYSTEM_NAME) \
	$(call flag,run_args,RUN_ARGS)
# The container targets run on the host's python3 (standard library only), before any environment exists.
DOCKER_MAIN = $(PYTHON_BOOTSTRAP) -m code.docker --action=$@ $(call flag,base_image,BASE_IMAGE) \
	$(call flag,no_build,NO_BUILD) $(call flag,docker_args,DOCKER_ARGS) $(call flag,docker_command,DOCKER_COMMAND) \
	$(call flag,mig_conf,MIG_CONF) $(call flag,scratch_path,MLPERF_SCRATCH_PATH) $(call flag,log_dir,LOG_DIR) \
	$(call flag,submitter,SUBMITTER) $(call flag,benchmarks,BENCHMARKS) $(call flag,system_name,SYSTEM_NAME) \
	$(call flag,run_args,RUN_ARGS)

# make cuts a recipe into commands at each line break, so a value holding one would reach the shell as a command
# of its own: refused while make reads this file, before any recipe runs (`make -i` cannot ignore a parse error).
define newline


endef
carriage_return := $(shell printf '\r')
line_break_in = $(or $(findstring $(newline),$(value $(1))),$(findstring $(carriage_return),$(value $(1))))
refuse_line_break = $(error $(1) holds a line break, which make would run as a command of its own: give $(1) on one line)
$(foreach variable,$(DATA_VARIABLES),$(if $(call line_break_in,$(variable)),$(call refuse_line_break,$(variable))))

.DEFAULT_GOAL := help
.PHONY: help prebuild build_docker docker_add_user launch_docker configure_mig teardown_mig build link_dirs show_config download_model download_data preprocess_data generate_engines \
	selftest_gpu calibrate run_harness run bench find_peak tune run_audit_harness report generate_conf_files stage_results stage_compliance \
	truncate_results export_submission check_submission pack_submission update_results update_compliance \
	copy_results_artifacts add_custom_system lock clean test test_all \
	serve_triton serve_llm

# make asks the bootstrap when a file below is newer than the stamp, and also when the stamp ("<environment>
# <sha256 of its lock>") does not name the digest of that lock now (a lock changed under an old time); the
# bootstrap decides by the digest alone and installs nothing when it matches.
$(VENV_STAMP): requirements/main.txt scripts/bootstrap_venv.py scripts/envlock.py
	@$(PYTHON_BOOTSTRAP) scripts/bootstrap_venv.py --venv "$(VENV)"
installed_environment := $(file <$(VENV_STAMP))
ifneq ($(word 2,$(installed_environment)),$(firstword $(shell sha256sum \
	'requirements/$(subst ',,$(firstword $(installed_environment) main)).txt' 2>/dev/null)))
.PHONY: $(VENV_STAMP)
endif

help: ## List the targets and variables
	@$(PYTHON_BOOTSTRAP) scripts/make_help.py Makefile

prebuild: ## Set up the environment: build the image and enter it where a docker engine runs, else the local .venv
	@$(DOCKER_MAIN)
build_docker: ## Build this machine's image (BASE_IMAGE=...), then run make build in it (NO_BUILD=1: not)
	@$(DOCKER_MAIN)
docker_add_user: ## Add your user (name, uid, gid) to the image, so what the container writes is yours
	@$(DOCKER_MAIN)
launch_docker: ## Enter the image with the repository at /work (DOCKER_COMMAND='make run': run it headless)
	@$(DOCKER_MAIN)
configure_mig: ## Partition every MIG-capable GPU into MIG_CONF=N instances (nvidia-smi, as root)
	@$(DOCKER_MAIN)
teardown_mig: ## Remove the MIG instances and turn MIG off
	@$(DOCKER_MAIN)
build: $(VENV_STAMP) ## Finish the environment and print which backends (ONNX Runtime, TensorRT, CUDA) work here
	@$(MAIN)
link_dirs: $(VENV_STAMP) ## Link data, models and preprocessed_data from MLPERF_SCRATCH_PATH into build/
	@$(MAIN)
show_config: $(VENV_STAMP) ## Print the resolved config per benchmark and scenario, with where each value came from
	@$(MAIN)
download_model: $(VENV_STAMP) ## Fetch the model of each selected benchmark
	@$(MAIN)
download_data: $(VENV_STAMP) ## Fetch the data set, or print where to get it and the expected layout
	@$(MAIN)
preprocess_data: $(VENV_STAMP) ## Write the preprocessed tensors and map files
	@$(MAIN)
generate_engines: $(VENV_STAMP) ## Build the engines (ONNX Runtime model or TensorRT plan)
	@$(MAIN)
selftest_gpu: $(VENV_STAMP) ## On an NVIDIA GPU: CUDA round trips on every GPU; with TensorRT, small plans vs ONNX Runtime
	@$(MAIN)
calibrate: $(VENV_STAMP) ## Regenerate the INT8 calibration cache
	@$(MAIN)
run_harness: $(VENV_STAMP) ## Run the selected benchmarks and scenarios through LoadGen
	@$(MAIN)
run: $(VENV_STAMP) ## Main job: prepare and run the embedded default benchmark end to end
	@$(MAIN)
bench: $(VENV_STAMP) ## Measure the harness against baselines measured in the same run (ratios)
	@$(MAIN)
find_peak: $(VENV_STAMP) ## Find and confirm the peak Server QPS / expected QPS and latencies; write them to custom.py
	@$(MAIN)
tune: $(VENV_STAMP) ## Find and confirm the best batch size, instances x threads and Server batching window; write them to custom.py
	@$(MAIN)
serve_triton: $(VENV_STAMP) ## Serve an engine from a Triton server on this node (RUN_ARGS="--harness_type=triton --benchmarks=.. --scenarios=.. --triton_port=8001")
	@$(MAIN)
serve_llm: $(VENV_STAMP) ## Serve an LLM benchmark's model from vLLM (wan-2.2: its video server) here, or print the GPU command (RUN_ARGS="--benchmarks=llama3.1-8b --engine=vllm --port=8000")
	@$(MAIN)
run_audit_harness: $(VENV_STAMP) ## Run and verify the compliance tests (TEST01, TEST04)
	@$(MAIN)
report: $(VENV_STAMP) ## HTML report with plots of the newest LOG_DIR's runs in build/reports (RUN_ARGS=--all: every run)
	@$(MAIN)
generate_conf_files: $(VENV_STAMP) ## Write measurements/ (measurements.json, user.conf, README.md)
	@$(MAIN)
stage_results: $(VENV_STAMP) ## Copy the best valid runs into build/submission-staging
	@$(MAIN)
stage_compliance: $(VENV_STAMP) ## Copy the compliance verdicts and logs into the staging tree
	@$(MAIN)
truncate_results: $(VENV_STAMP) ## Back up the full accuracy logs and truncate them as the rules require
	@$(MAIN)
export_submission: $(VENV_STAMP) ## Write a pristine submission tree to build/submission
	@$(MAIN)
check_submission: $(VENV_STAMP) ## Check the exported tree against the round's rules
	@$(MAIN)
pack_submission: $(VENV_STAMP) ## Write mlperf-inference-$(SUBMITTER)-submission.tar.gz and its .sha1
	@$(MAIN)
update_results: $(VENV_STAMP) ## Old name of stage_results
	@$(MAIN)
update_compliance: $(VENV_STAMP) ## Old name of stage_compliance
	@$(MAIN)
copy_results_artifacts: $(VENV_STAMP) ## Old name of export_submission
	@$(MAIN)
add_custom_system: $(VENV_STAMP) ## Register this machine and write config stubs (RUN_ARGS="--system_id=ID --yes")
	@$(MAIN)
lock: ## Resolve pyproject.toml's pins into the hash-locked requirements/*.txt (needs the package registry)
	@$(PYTHON_BOOTSTRAP) scripts/lock_env.py
clean: $(VENV_STAMP) ## Remove engines and temporary build files (RUN_ARGS=--yes: logs and submission trees too)
	@$(MAIN)
test: $(VENV_STAMP) ## Run the fast test suite
	@$(PY) -m pytest
test_all: $(VENV_STAMP) ## Run every test, the slow end-to-end ones included
	@$(PY) -m pytest -m "slow or not slow"
