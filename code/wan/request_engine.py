"""wan-2.2-t2v-a14b's pipeline as a request-level engine (generation.RequestEngine) of the token-streaming system under
test: the pipeline runs in the diffusers environment, in a child process (pipeline_worker.py serve) that loads the
model once and then makes one video per request line, writing it as an mp4. A worker thread here sends it one
prompt at a time and reports each video as the request's answer (the mp4's bytes, which the benchmark's answer
kind, answers.Media, logs as they are) followed by one final chunk of one token: LoadGen counts a video as one
sample, and token latencies do not apply to this benchmark.

A child that dies, or answers with an error, fails the run with the end of its log (nothing is staged from a
failed run)."""
from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.generation import Request, TokenStream
from ..common.processes import log_tail, stop_group
from ..common.prompts import TEXT, Chat, Text

JOIN_TIMEOUT_S = 60.0
VIDEO_TOKEN = 0          # the one "token" of a video's final chunk
END_TOKEN = 1            # what the system under test appends to a one-token output (GenerationSettings.eos_token_ids)


class EngineFailed(RuntimeError):
    pass


def prompt_text(prompt: Any, request_id: int) -> str:
    parts = [part for part in prompt.contents() if isinstance(part, Text)] if isinstance(prompt, Chat) else []
    if len(parts) != 1:
        raise ValueError(f"request {request_id}: a wan prompt is one text, not {len(parts)} parts")
    return parts[0].text


class WanRequestEngine:
    prompt_parts = frozenset({TEXT})

    def __init__(self, command: list[str], settings: Mapping[str, Any], log_path: Path, number: int = 0) -> None:
        self.name = f"wan pipeline {number}"
        self.command, self.settings, self.log_path = command, dict(settings), log_path
        self._waiting: deque[Request] = deque()
        self._work = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._stream: TokenStream | None = None
        self._child: subprocess.Popen | None = None
        self._folder: tempfile.TemporaryDirectory | None = None
        self.shape: dict[str, int] = {}

    def open(self, stream: TokenStream) -> None:
        """Start the child and wait until its model is loaded (a failure here stops the run before it starts)."""
        self._folder = tempfile.TemporaryDirectory(prefix="wan-videos-")
        settings_file = Path(self._folder.name) / "settings.json"
        settings_file.write_text(json.dumps(self.settings))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._child = subprocess.Popen([*self.command, "serve", str(settings_file)], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=log, start_new_session=True,
                                           cwd=str(self.settings["repo"]), text=True, bufsize=1)
        ready = self._answer()
        self.shape = {k: int(ready[k]) for k in ("num_frames", "height", "width")}
        self._stream, self._stopping = stream, False
        self._thread = threading.Thread(target=self._serve, daemon=True, name=self.name)
        self._thread.start()

    def submit(self, requests: Sequence[Request]) -> None:
        with self._work:
            self._waiting.extend(requests)
            self._work.notify()

    def cancel(self, request_ids: Sequence[int]) -> None:
        drop = set(request_ids)
        with self._work:
            self._waiting = deque(r for r in self._waiting if r.id not in drop)

    def close(self) -> None:
        with self._work:
            self._stopping = True
            self._waiting.clear()
            self._work.notify_all()
        if self._child is not None:
            if self._child.stdin:
                self._child.stdin.close()
            stop_group(self._child, signal.SIGTERM, grace_s=10.0)
            self._child = None
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT_S)
            self._thread = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def _answer(self) -> dict:
        line = self._child.stdout.readline() if self._child and self._child.stdout else ""
        answer = json.loads(line) if line.strip() else None
        if answer is None or "error" in answer:
            if answer is None:
                try:                     # its output closed: it is ending, or has ended
                    self._child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            why = answer["error"] if answer else f"it ended (exit status {self._child.poll()})"
            raise EngineFailed(f"{self.name} failed: {why}; the end of its log ({self.log_path}):\n"
                               f"{log_tail(self.log_path, 15)}")
        return answer

    def video(self, request: Request) -> bytes:
        out = Path(self._folder.name) / f"{request.id}.mp4"
        self._child.stdin.write(json.dumps({"id": request.id, "prompt": prompt_text(request.prompt, request.id),
                                            "out": str(out)}) + "\n")
        self._child.stdin.flush()
        self._answer()
        data = out.read_bytes()
        out.unlink()
        return data

    def _take(self) -> Request | None:
        with self._work:
            while not self._waiting and not self._stopping:
                self._work.wait()
            return None if self._stopping else self._waiting.popleft()

    def _serve(self) -> None:
        while (request := self._take()) is not None:
            try:
                data = self.video(request)
                self._stream.answer(request.id, data)
                self._stream.chunk(request.id, [VIDEO_TOKEN], True)
            except BaseException as error:     # noqa: BLE001 - reported to the system under test, which fails the run
                with self._work:
                    if self._stopping:
                        return
                    self._stopping = True
                    self._waiting.clear()
                self._stream.failed(error)
                return
