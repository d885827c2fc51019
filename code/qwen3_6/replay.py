"""The agentic replay of qwen3.6-27b: 20 recorded SWE-bench agent conversations (1,007 assistant turns), one JSON
line per turn (`conversation_id`, `turn`, `role`: user, assistant or tool; the first row of a conversation carries its
`system` and `tools`), as the client's example ships it (examples/11_Edge_Agentic_Example/agentic_coding_2.5h.jsonl).

The client replays each conversation with its recorded history and scores each assistant turn's tool calls against
the recording (multiset IoU). A model with a shorter context than Qwen3.6-27B's (the substitute's 4,096 tokens) gets
each conversation cut after the last assistant turn whose history and answer it holds (`trim`); the cut file is
written beside the run and the run says so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..common.errors import EXIT_FAILURE, UserError
from ..llm_tasks.items import TaskItem

REPLAY_FILE = "agentic_coding_2.5h.jsonl"
CONVERSATIONS, ASSISTANT_TURNS = 20, 1007
MESSAGE_OVERHEAD_TOKENS = 8      # a chat template's role markers and separators per message, generously


def read_rows(path: Path) -> list[dict]:
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as error:
        raise UserError(f"{path} is not the agentic replay's JSON Lines file ({error}).", exit_code=EXIT_FAILURE) \
            from None
    if not rows or any(not isinstance(r, dict) or "conversation_id" not in r or "role" not in r for r in rows):
        raise UserError(f"{path} is not the agentic replay's JSON Lines file (rows with conversation_id and role).",
                        exit_code=EXIT_FAILURE)
    return rows


def conversations(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """conversation_id -> its rows, in file order."""
    found: dict[str, list[dict]] = {}
    for row in rows:
        found.setdefault(str(row["conversation_id"]), []).append(row)
    return found


def read_items(path: Path) -> list[TaskItem]:
    """One item per conversation (its first user turn): what the toolkit's plan and records count. The client
    reads the file itself."""
    items = []
    for conversation_id, rows in conversations(read_rows(path)).items():
        first = rows[0]
        items.append(TaskItem(user=str(first.get("content") or ""), reference="", subset=conversation_id,
                              system=str(first.get("system") or ""),
                              row={"assistant_turns": sum(r["role"] == "assistant" for r in rows)}))
    return items


def _row_text(row: dict) -> str:
    parts = [row.get("system"), row.get("content"), row.get("reasoning_content")]
    parts += [json.dumps(row[key]) for key in ("tools", "tool_calls", "tool_results") if row.get(key)]
    return "\n".join(str(p) for p in parts if p)


@dataclass(frozen=True)
class Trimmed:
    rows: tuple[dict, ...]
    conversations: int
    assistant_turns: int        # the scorable turns kept
    recorded_turns: int         # the assistant turns of the conversations kept, as recorded


def trim(rows: Sequence[dict], count_tokens: Callable[[str], int], budget_tokens: int,
         max_conversations: int | None = None, max_turns: int | None = None) -> Trimmed:
    """Each conversation cut after its last assistant turn whose prompt (everything before it) fits in
    `budget_tokens` (the context less the answer's tokens), at most `max_turns` assistant turns each, the first
    `max_conversations` conversations; a conversation whose first assistant turn does not fit is left out.
    UserError where none is left."""
    kept: list[dict] = []
    used = turns = recorded = 0
    for conversation in conversations(rows).values():
        if max_conversations is not None and used >= max_conversations:
            break
        prompt, end, answered = 0, 0, 0
        for index, row in enumerate(conversation):
            if row["role"] == "assistant":
                if prompt > budget_tokens or (max_turns is not None and answered >= max_turns):
                    break
                answered, end = answered + 1, index + 1
            prompt += count_tokens(_row_text(row)) + MESSAGE_OVERHEAD_TOKENS
        if answered:
            kept.extend(conversation[:end])
            used, turns = used + 1, turns + answered
            recorded += sum(r["role"] == "assistant" for r in conversation)
    if not kept:
        raise UserError(f"No conversation of the agentic replay fits in {budget_tokens} prompt tokens: the model's "
                        f"context is too short for it.", exit_code=EXIT_FAILURE)
    return Trimmed(tuple(kept), used, turns, recorded)


def write_rows(rows: Sequence[dict], path: Path) -> Path:
    from ..common.fileio import write_atomically

    return write_atomically(path, "".join(json.dumps(row) + "\n" for row in rows))
