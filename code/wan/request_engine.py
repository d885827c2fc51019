"""wan-2.2-t2v-a14b's pipeline as a request-level engine (generation.RequestEngine) of the token-streaming system under
test: the pipeline runs in the diffusers environment, in a child process (pipeline_worker.py serve) that loads the
model once and then makes one video per request line, writing it as an mp4. The engine's worker thread
(queued_engine.py) sends it one prompt at a time and reports each video as the request's answer (the mp4's bytes,
which the benchmark's answer kind, answers.Media, logs as they are) followed by one final chunk of one token:
LoadGen counts a video as one sample, and token latencies do not apply to this benchmark.

A child that dies, or answers with an error, fails the run with the end of its log (nothing is staged from a
failed run)."""
from __future__ import annotations

import json
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping

from ..common.generation import Request, TokenStream
from ..common.processes import log_tail, stop_group
from ..common.prompts import TEXT, Chat, Text
from ..common.queued_engine import QueuedRequestEngine

VIDEO_TOKEN = 0          # the one "token" of a video's final chunk
END_TOKEN = 1            # what the system under test appends to a one-token output (GenerationSettings.eos_token_ids)


class EngineFailed(RuntimeError):
    pass


def prompt_text(prompt: Any, request_id: int) -> str:
    parts = [part for part in prompt.contents() if isinstance(part, Text)] if isinstance(prompt, Chat) else []
    if len(parts) != 1:
        raise ValueError(f"request {request_id}: a wan prompt is one text, not {len(parts)} parts")
    return parts[0].text


class PipelineChild:
    """One pipeline process (pipeline_worker.py serve) in the diffusers environment: `start()` returns once its model
    is loaded (`shape`: the videos' num_frames, height, width), `video(id, prompt)` makes one video and returns its
    mp4's bytes, `stop()` ends it (a video in progress is dropped). EngineFailed with the end of its log where it
    dies or answers with an error. The in-process engine and the toolkit's video server (video_server.py) both run
    their videos through it, so that both make the same bytes."""

    def __init__(self, command: list[str], settings: Mapping[str, Any], log_path: Path, name: str) -> None:
        self.command, self.settings, self.log_path, self.name = command, dict(settings), log_path, name
        self._child: subprocess.Popen | None = None
        self._folder: tempfile.TemporaryDirectory | None = None
        self.shape: dict[str, int] = {}

    def start(self) -> "PipelineChild":
        self._folder = tempfile.TemporaryDirectory(prefix="wan-videos-")
        settings_file = Path(self._folder.name) / "settings.json"
        settings_file.write_text(json.dumps(self.settings))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._child = subprocess.Popen([*self.command, "serve", str(settings_file)], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=log, start_new_session=True,
                                           cwd=str(self.settings["repo"]), text=True, bufsize=1)
        try:
            ready = self._answer()
        except BaseException:       # its model did not load: the child ended, or is ended, and its folder goes
            self.stop()
            raise
        self.shape = {k: int(ready[k]) for k in ("num_frames", "height", "width")}
        return self

    def stop(self) -> None:
        if self._child is not None:
            if self._child.stdin:
                self._child.stdin.close()
            stop_group(self._child, signal.SIGTERM, grace_s=10.0)
            self._child = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def _answer(self) -> dict:
        line = self._child.stdout.readline() if self._child and self._child.stdout else ""
        answer = json.loads(line) if line.strip() else None
        if answer is None or "error" in answer:
            if answer is None and self._child is not None:
                try:                     # its output closed: it is ending, or has ended
                    self._child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            status = self._child.poll() if self._child is not None else "stopped"
            why = answer["error"] if answer else f"it ended (exit status {status})"
            raise EngineFailed(f"{self.name} failed: {why}; the end of its log ({self.log_path}):\n"
                               f"{log_tail(self.log_path, 15)}")
        return answer

    def video(self, request_id: int, prompt: str) -> bytes:
        if self._child is None or self._folder is None:
            raise EngineFailed(f"{self.name} is not running")
        out = Path(self._folder.name) / f"{request_id}.mp4"
        self._child.stdin.write(json.dumps({"id": request_id, "prompt": prompt, "out": str(out)}) + "\n")
        self._child.stdin.flush()
        self._answer()
        data = out.read_bytes()
        out.unlink()
        return data


class WanRequestEngine(QueuedRequestEngine):
    prompt_parts = frozenset({TEXT})

    def __init__(self, command: list[str], settings: Mapping[str, Any], log_path: Path, number: int = 0) -> None:
        super().__init__()
        self.name = f"wan pipeline {number}"
        self.pipeline = PipelineChild(command, settings, log_path, self.name)

    @property
    def shape(self) -> dict[str, int]:
        return self.pipeline.shape

    def _start(self) -> None:
        """Start the child and wait until its model is loaded."""
        self.pipeline.start()

    def _interrupt(self) -> None:
        """Stop the child: a video in progress is dropped, and the worker waiting for it ends."""
        self.pipeline.stop()

    def _release(self) -> None:
        self.pipeline.stop()

    def video(self, request: Request) -> bytes:
        return self.pipeline.video(request.id, prompt_text(request.prompt, request.id))

    def _serve_batch(self, batch: list[Request], stream: TokenStream) -> None:
        for request in batch:
            data = self.video(request)
            stream.answer(request.id, data)
            stream.chunk(request.id, [VIDEO_TOKEN], True)
