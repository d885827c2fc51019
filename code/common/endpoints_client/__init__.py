"""The MLCommons endpoints client (mlcommons/endpoints, console script `inference-endpoint`): the unmodified load
generator of the round's endpoints track, run as a child process from an environment of its own.

The client is not on PyPI and needs Python >= 3.12 (the toolkit runs on 3.11): `interpreter.py` finds a Python the
client can run on, `environment.py` makes .venv-endpoints from the user's checkout (MLCOMMONS_ENDPOINTS_DIR), every
package hash-checked from the checkout's own uv.lock, and records which interpreter, client version and commit it
holds.
"""
