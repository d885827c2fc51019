"""The payload builders of the openai harness: one per API of OpenAI-compatible servers, each writing a request's
body from its prompt (code/common/prompts.py) and generation settings, and reading the choices of an answer (a
stream chunk, or a whole answer where a server does not stream). Everything else (sessions, streaming, scheduling,
faults, token ids against text, metrics) is the transport's (transport.py), the same for every API.

- `completions`: `/v1/completions` with the prompt's token ids (every text benchmark: the reference feeds the model
  its data set's token ids);
- `chat`: `/v1/chat/completions`, messages of text, images as `image_url` data URLs and audio as `input_audio`
  (base64 of the bytes the data set stores, never decoded or recompressed);
- `transcriptions`: `/v1/audio/transcriptions`, the multipart form vLLM serves Whisper on (the audio file as stored,
  a text part as the decoder's prompt);
- `videogen`: `/v1/videos/generations`, one video per text prompt, not streamed, in the MLCommons endpoints client's
  wire format (`api_type: videogen`, for TensorRT-LLM's trtllm-serve VisualGen): a JSON body of the prompt and the
  benchmark's generation fields (`GenerativeBenchmark.serving_request`); the answer is the video file itself
  (`video/mp4`, what trtllm-serve's route sends back), or JSON carrying it base64 (`video_bytes`) or naming a file
  the client can read (`video_path`, on storage shared with the server).

The generation settings are the reference's wherever the API carries them: sampling (temperature, top_p, top_k, a
seed), the output cap, min_tokens and the model's EOS ids as stop tokens (chat and completions), and vLLM's
`return_token_ids` where the transport reads the server's token ids. A model says which API serves it
(`ModelSpec.serving_api`); by default its prompt parts choose (`payload_for`).
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Mapping

import msgspec

from ..generation import GenerationSettings
from ..prompts import AUDIO, IMAGE, TEXT, TOKEN_IDS, Audio, Image, Prompt, Text, parts_of

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
# What a choice of an answer carries: (token ids as sent or None, text, finish reason or None).
Choice = tuple[Any, str, "str | None"]


class Payload:
    """One API: its path, the prompt parts it carries, its body and how its answers read."""

    name: str
    path: str
    parts: frozenset[str]
    media = False        # True: one whole answer that is a media file (`media`), not token chunks

    def body(self, model: str, prompt: Prompt, settings: GenerationSettings, max_tokens: int,
             server_ids: bool, stream: bool = True, stream_interval: int = 0) -> tuple[Any, dict[str, str]]:
        """(the request's body: bytes or aiohttp form data, its headers). `stream` False asks for one whole
        answer; `stream_interval` (vLLM's, 0: not sent) for chunks of that many tokens, the first and the last
        sent at once."""
        raise NotImplementedError

    def choices(self, message: Any) -> list | None:
        """The choices of a stream chunk or of a whole answer (None: it is not an answer of this API)."""
        return message.get("choices") if isinstance(message, dict) else None

    def read(self, choice: dict) -> Choice | None:
        """What one choice carries; None for a choice that carries nothing yet (a chat stream's role header)."""
        raise NotImplementedError

    def refuse(self, prompt: Prompt) -> None:
        """ValueError when `prompt` has parts this API does not carry."""
        extra = parts_of(prompt) - self.parts
        if extra:
            raise ValueError(f"{self.path} carries {', '.join(sorted(self.parts))}, not {', '.join(sorted(extra))}")


def _sampling(body: dict, settings: GenerationSettings) -> dict:
    if settings.top_k > 0:
        body["top_k"] = int(settings.top_k)
    if settings.seed is not None:
        body["seed"] = int(settings.seed)
    return body


def _generation_body(head: dict, cap: str, settings: GenerationSettings, max_tokens: int, server_ids: bool,
                     stream: bool = True, stream_interval: int = 0) -> dict:
    """`head` (the model and the prompt) followed by the generation settings every JSON API takes, in the order the
    bodies have always had: the output cap under the API's name `cap`, min tokens, sampling, EOS ids as stop
    tokens, then top-k and seed where set, and return_token_ids where the transport reads the server's ids.
    Server-side sampling (`settings.server_sampling`) leaves out the sampling fields alone (min tokens, sampling, stop
    tokens): `stream` and `stream_interval` are the transport's, whatever the sampling."""
    if settings.server_sampling:          # the server's own sampling, stop tokens and minimum, as the reference
        body = {**head, cap: int(max_tokens), "n": 1, "stream": bool(stream)}
    else:
        body = {**head, cap: int(max_tokens), "min_tokens": min(int(settings.min_new_tokens), int(max_tokens)),
                "temperature": float(settings.temperature), "top_p": float(settings.top_p),
                "n": 1, "stream": bool(stream), "stop_token_ids": [int(t) for t in settings.eos_token_ids],
                "ignore_eos": False}
        _sampling(body, settings)
    if server_ids:
        body["return_token_ids"] = True
    if stream and stream_interval > 0:
        body["stream_interval"] = int(stream_interval)
    return body


def _json(body: dict) -> tuple[bytes, dict[str, str]]:
    # msgspec writes what json.dumps(body, separators=(",", ":")) writes for ASCII bodies, about 6x faster (20
    # against 140 microseconds for a 512-token prompt); other text as UTF-8 rather than \u escapes.
    return msgspec.json.encode(body), JSON_HEADERS


class Completions(Payload):
    name, path, parts = "completions", "/v1/completions", frozenset({TOKEN_IDS})

    def body(self, model, prompt, settings, max_tokens, server_ids, stream=True, stream_interval=0):
        self.refuse(prompt)
        return _json(_generation_body({"model": model, "prompt": prompt.tolist()}, "max_tokens", settings, max_tokens,
                                      server_ids, stream, stream_interval))

    def read(self, choice):
        return choice.get("token_ids"), str(choice.get("text") or ""), choice.get("finish_reason")


class ChatCompletions(Payload):
    name, path, parts = "chat", "/v1/chat/completions", frozenset({TEXT, IMAGE, AUDIO})

    def body(self, model, prompt, settings, max_tokens, server_ids, stream=True, stream_interval=0):
        self.refuse(prompt)
        messages = [{"role": m.role, "content": _message_content(m.content)} for m in prompt.messages]
        body = _generation_body({"model": model, "messages": messages}, "max_completion_tokens", settings,
                                max_tokens, server_ids, stream, stream_interval)
        if settings.response_format is not None:      # guided decoding, as the reference sends it
            body["response_format"] = msgspec.json.decode(settings.response_format)
        return _json(body)

    def read(self, choice):
        message = choice.get("delta") if "delta" in choice else choice.get("message")
        text = str((message or {}).get("content") or "") if isinstance(message, dict) else ""
        ids, finish = choice.get("token_ids"), choice.get("finish_reason")
        if ids is None and not text and finish is None:
            return None            # the stream's first chunk names the role only
        return ids, text, finish


class Transcriptions(Payload):
    """vLLM's Whisper endpoint. It streams text (no token ids): the transport tokenizes it with the benchmark's
    tokenizer. A whole (non-streamed) answer has no finish reason; it is read as ended by the model ("stop")."""

    name, path, parts = "transcriptions", "/v1/audio/transcriptions", frozenset({AUDIO, TEXT})

    def body(self, model, prompt, settings, max_tokens, server_ids, stream=True, stream_interval=0):
        import aiohttp

        self.refuse(prompt)
        contents = list(prompt.contents())
        audio = [part for part in contents if isinstance(part, Audio)]
        if len(audio) != 1:
            raise ValueError(f"{self.path} takes one audio clip per request, not {len(audio)}")
        form = aiohttp.FormData()
        form.add_field("file", audio[0].data, filename=f"audio.{_audio_format(audio[0])}",
                       content_type=audio[0].media_type)
        fields = {"model": model, "response_format": "json", "stream": "true" if stream else "false",
                  "temperature": repr(float(settings.temperature)), "top_p": repr(float(settings.top_p)),
                  "max_completion_tokens": str(int(max_tokens))}
        text = "".join(part.text for part in contents if isinstance(part, Text))
        if text:
            fields["prompt"] = text
        for name, value in _sampling({}, settings).items():
            fields[name] = str(value)
        if stream and stream_interval > 0:
            fields["stream_interval"] = str(int(stream_interval))
        for name, value in fields.items():
            form.add_field(name, value)
        return form, {"Accept": "text/event-stream"}

    def choices(self, message):
        if isinstance(message, dict) and "choices" not in message and isinstance(message.get("text"), str):
            return [{"delta": {"content": message["text"]}, "finish_reason": "stop"}]
        return super().choices(message)

    read = ChatCompletions.read


MP4_BRAND_AT = slice(4, 8)       # an ISO BMFF (mp4) file opens with its `ftyp` box: size, then b"ftyp"


class VideoGenerations(Payload):
    """The endpoints client's `videogen` body: `{"prompt": ..., **fields}`, the fields the benchmark's (the reference's
    negative prompt, size as WxH, num_frames, fps, steps, both guidance scales, seed, boundary_ratio) and
    `response_format: video_bytes`, never `stream` (the API does not stream) nor a model (trtllm-serve serves one)."""

    name, path, parts, media = "videogen", "/v1/videos/generations", frozenset({TEXT}), True

    def __init__(self, fields: Mapping[str, Any] | None = None) -> None:
        self.fields = dict(fields or {})

    def body(self, model, prompt, settings, max_tokens, server_ids, stream=True, stream_interval=0):
        self.refuse(prompt)
        texts = [part for part in prompt.contents() if isinstance(part, Text)]
        if len(texts) != 1:
            raise ValueError(f"{self.path} takes one text prompt per video, not {len(texts)} parts")
        return _json({"prompt": texts[0].text, **self.fields})

    def read(self, choice):
        raise ValueError(f"{self.path} answers with a video, not choices")

    def media_file(self, data: bytes, content_type: str) -> bytes:
        """The video file of one answer: the body itself where it is an mp4, else the JSON answer's base64
        `video_bytes`, or the file its `video_path` names. ValueError saying what came instead."""
        if data[MP4_BRAND_AT] == b"ftyp":
            return data
        try:
            answer = json.loads(data)
        except ValueError:
            raise ValueError(f"its answer is neither an mp4 file nor JSON ({content_type or 'no content type'}, "
                             f"{len(data)} bytes: {data[:60]!r})") from None
        if isinstance(answer, dict) and isinstance(answer.get("video_bytes"), str):
            try:
                video = base64.b64decode(answer["video_bytes"], validate=True)
            except ValueError:
                raise ValueError("its answer's video_bytes is not base64") from None
        elif isinstance(answer, dict) and isinstance(answer.get("video_path"), str):
            try:
                video = Path(answer["video_path"]).read_bytes()
            except OSError as error:
                raise ValueError(f"it answered with a video_path this machine cannot read ({error}); give the "
                                 f"server and this node shared storage, or let it answer the video's bytes") from None
        else:
            raise ValueError(f"its answer carries no video (neither video_bytes nor video_path): "
                             f"{json.dumps(answer)[:200]}")
        if video[MP4_BRAND_AT] != b"ftyp":
            raise ValueError(f"the video it answered is not an mp4 file (it starts {video[:12]!r})")
        return video


PAYLOADS: dict[str, type[Payload]] = {p.name: p for p in (Completions, ChatCompletions, Transcriptions,
                                                          VideoGenerations)}


def payload_for(parts: frozenset[str] | set[str], api: str = "", fields: Mapping[str, Any] | None = None) -> Payload:
    """The builder of `api` (a PAYLOADS name), or where none is named the one for prompts of `parts`: token ids go to
    /v1/completions, audio without images to /v1/audio/transcriptions (how vLLM serves Whisper), any other chat to
    /v1/chat/completions. `fields`: what every request carries beyond the prompt (the videogen API's generation
    fields). ValueError naming the parts when the API cannot carry them."""
    if api and api not in PAYLOADS:
        raise ValueError(f"no serving API is named {api!r}; the APIs are {', '.join(PAYLOADS)}")
    if not api:
        api = "completions" if TOKEN_IDS in parts else "transcriptions" if AUDIO in parts and IMAGE not in parts \
            else "chat"
    payload = VideoGenerations(fields) if api == VideoGenerations.name else PAYLOADS[api]()
    extra = set(parts) - payload.parts
    if extra:
        raise ValueError(f"{payload.path} cannot carry prompts of {', '.join(sorted(extra))}")
    return payload


def _message_content(parts) -> str | list[dict]:
    """A message of one text part as its string (what OpenAI clients, and the references' clients, send for a text
    message; chat templates that tell the two forms apart then render what the reference's model was given), any
    other as its list of parts."""
    if len(parts) == 1 and isinstance(parts[0], Text):
        return parts[0].text
    return [_content(part) for part in parts]


def _content(part) -> dict:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image_url", "image_url": {"url": data_url(part.media_type, part.data)}}
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(part.data).decode("ascii"),
                                                   "format": _audio_format(part)}}


def data_url(media_type: str, data: bytes) -> str:
    """An RFC 2397 data URL of `data`, base64: the stored bytes travel unchanged."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _audio_format(part: Audio) -> str:
    """The `format` of an input_audio part (wav, mp3, flac, ...) from its media type."""
    subtype = part.media_type.split("/", 1)[1].split(";")[0].removeprefix("x-")
    return {"mpeg": "mp3", "wave": "wav", "vnd.wave": "wav"}.get(subtype, subtype)
