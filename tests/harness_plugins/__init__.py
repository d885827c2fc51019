"""Harness plug-ins that live only in tests, one module each: tests/test_harness_contract.py runs every module here
through the harness contract, as it runs the toolkit's own harnesses. Adding one is adding its module, which
defines:

- `register()`: registers its harness plug-ins (HARNESSES.register, as a user's plug-in does from its own module)
  and returns their names; the contract tests unregister them after their cases, and the child process of a run
  calls it again;
- `CONTRACT_FLAGS`: the command line (its own flags) the contract runs it with.

Its configs: none (a harness type that no config names takes the configs registered for every harness).
"""
