"""A Hugging Face checkpoint folder the user brings (a closed-division model)."""
from __future__ import annotations

from pathlib import Path

from ..common.errors import EXIT_FAILURE, UserError


def require_checkpoint(folder: Path, model: str, advice: str) -> Path:
    """`folder` when it holds config.json, tokenizer.json and *.safetensors; else UserError naming what is missing,
    followed by `advice` (where to get the model and where it goes)."""
    missing = [name for name in ("config.json", "tokenizer.json") if not (folder / name).is_file()]
    if not folder.is_dir() or missing or not any(folder.glob("*.safetensors")):
        what = "is missing" if not folder.is_dir() else f"lacks {', '.join(missing) or '*.safetensors'}"
        raise UserError(f"The {model} checkpoint folder {folder} {what}. {advice}", exit_code=EXIT_FAILURE)
    return folder
