"""A fake model server on 127.0.0.1 that speaks the OpenAI and DashScope wire formats.

One `FakeModelServer` per test, flavour "openai" or "dashscope". Set `.mode` to choose how it answers:

* "ok": a well-formed answer (embeddings come back in reverse order, with their indices, and are not
  normalized, so clients must sort and normalize);
* "slow": nothing until `slow_seconds` pass (or the server stops), i.e. past any sane client timeout;
* "500" / "400": that status with the provider's JSON error body;
* "garbage": status 200, a body that is not JSON;
* "wrong_shape": status 200, JSON of the wrong shape;
* "429 then ok": one 429 after the mode is set, then "ok";
* "429": always 429, with `Retry-After: retry_after` seconds;
* "nan": embeddings holding NaN (written as the bare `NaN` token many servers emit);
* "wrong_dim": embeddings one value shorter than asked for;
* "empty": a well-formed answer with no embeddings (`data: []`) and an empty chat message.

Every request is recorded in `.requests` (method, path, headers, body) before it is answered, so a test
can prove what did or did not leave the process. Chat answers are `.chat_reply`, or `.reply_fn(messages)`
when set.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Flavor = Literal["openai", "dashscope"]
MODES = (
    "ok",
    "slow",
    "500",
    "400",
    "garbage",
    "wrong_shape",
    "429 then ok",
    "429",
    "nan",
    "wrong_dim",
    "empty",
)
FAKE_API_KEY = "sk-fake-0123456789abcdef"
DEFAULT_OPENAI_DIMENSION = 8
DEFAULT_DASHSCOPE_DIMENSION = 1024
BASE_PATHS = {"openai": "/v1", "dashscope": "/api/v1"}
# Paths the clients call, relative to the base URL.
OPENAI_EMBEDDINGS = "/v1/embeddings"
OPENAI_CHAT = "/v1/chat/completions"
DASHSCOPE_EMBEDDINGS = "/api/v1/services/embeddings/text-embedding/text-embedding"
DASHSCOPE_GENERATION = "/api/v1/services/aigc/text-generation/generation"


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: str

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def fake_vector(text: str, dimension: int) -> list[float]:
    """A deterministic, deliberately unnormalized vector for `text`."""
    out: list[float] = []
    counter = 0
    while len(out) < dimension:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        out.extend((byte - 127.5) / 40.0 for byte in digest)
        counter += 1
    return out[:dimension]


@dataclass
class _Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def _json_answer(status: int, payload: Any) -> _Answer:
    return _Answer(status, json.dumps(payload, ensure_ascii=False).encode())


@dataclass
class FakeModelServer:
    flavor: Flavor
    chat_reply: str = "ok"
    reply_fn: Callable[[list[dict[str, Any]]], str] | None = None
    embedding_dim: int | None = None  # forces this dimension whatever the client asks for
    slow_seconds: float = 5.0
    retry_after: int = 7  # the Retry-After of mode "429"
    requests: list[RecordedRequest] = field(default_factory=list)
    _mode: str = "ok"
    _throttled: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> FakeModelServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in "slow" mode
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what tests use ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{BASE_PATHS[self.flavor]}"

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in MODES:
            raise ValueError(f"unknown mode {value!r}; expected one of {MODES}")
        with self._lock:
            self._mode = value
            self._throttled = 0

    def bodies(self) -> list[str]:
        with self._lock:
            return [request.body for request in self.requests]

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.path == path]

    # --- answering -----------------------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_mode(self) -> str:
        """The mode for this request; "429 then ok" throttles exactly once."""
        with self._lock:
            if self._mode == "429 then ok":
                if self._throttled == 0:
                    self._throttled += 1
                    return "429"
                return "ok"
            return self._mode

    def answer(self, path: str, payload: Any) -> _Answer | None:
        """The answer to send, or None to send nothing (the "slow" mode once woken)."""
        mode = self._next_mode()
        if mode == "slow":
            if self._stopping.wait(self.slow_seconds):
                return None
            mode = "ok"
        if mode in ("500", "400", "429"):
            answer = self._error(int(mode))
            if mode == "429" and self._mode == "429":
                answer.headers["Retry-After"] = str(self.retry_after)
            return answer
        if mode in ("nan", "wrong_dim", "empty"):
            return self._faulty(mode, path, payload)
        if mode == "garbage":
            return _Answer(200, b"<html>this is not json {", "application/json")
        if mode == "wrong_shape":
            return _json_answer(200, {"unexpected": True, "data": "nope"})
        return self._ok(path, payload)

    def _faulty(self, mode: str, path: str, payload: Any) -> _Answer:
        """A 200 whose content is wrong: NaN vectors, short vectors, or nothing at all."""
        if path == OPENAI_EMBEDDINGS and isinstance(payload, dict):
            texts = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
            dimension = self.embedding_dim or payload.get("dimensions") or DEFAULT_OPENAI_DIMENSION
            if mode == "empty":
                texts = []
            if mode == "wrong_dim":
                dimension -= 1
            data = [
                {"object": "embedding", "index": i, "embedding": fake_vector(t, dimension)}
                for i, t in enumerate(texts)
            ]
            body = json.dumps({"object": "list", "data": data})
            if mode == "nan":
                body = body.replace(str(data[0]["embedding"][0]), "NaN", 1) if data else body
            return _Answer(200, body.encode())
        if path == OPENAI_CHAT:
            content = "" if mode == "empty" else ("NaN" if mode == "nan" else "{")
            choice = {"index": 0, "message": {"role": "assistant", "content": content}}
            return _json_answer(200, {"id": "chatcmpl-fake", "choices": [choice]})
        return _json_answer(404, {"error": {"message": f"mode {mode} has no answer for {path}"}})

    def _error(self, status: int) -> _Answer:
        message = {400: "bad request", 429: "rate limit exceeded", 500: "internal error"}[status]
        if self.flavor == "openai":
            return _json_answer(status, {"error": {"message": message, "type": "fake_error", "code": None}})
        code = {400: "InvalidParameter", 429: "Throttling.RateQuota", 500: "InternalError"}[status]
        return _json_answer(status, {"code": code, "message": message, "request_id": "fake-request"})

    def _reply_text(self, messages: list[dict[str, Any]]) -> str:
        return self.reply_fn(messages) if self.reply_fn is not None else self.chat_reply

    def _ok(self, path: str, payload: Any) -> _Answer:
        routes: dict[str, Callable[[Any], _Answer]] = {
            OPENAI_EMBEDDINGS: self._openai_embeddings,
            OPENAI_CHAT: self._openai_chat,
            DASHSCOPE_EMBEDDINGS: self._dashscope_embeddings,
            DASHSCOPE_GENERATION: self._dashscope_generation,
        }
        route = routes.get(path)
        if route is None or not isinstance(payload, dict):
            return _json_answer(404, {"error": {"message": f"no route {path}"}})
        return route(payload)

    def _openai_embeddings(self, payload: dict[str, Any]) -> _Answer:
        texts = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
        dimension = self.embedding_dim or payload.get("dimensions") or DEFAULT_OPENAI_DIMENSION
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(text, dimension)}
            for i, text in enumerate(texts)
        ]
        body = {"object": "list", "model": payload.get("model"), "data": data[::-1], "usage": {}}
        return _json_answer(200, body)

    def _openai_chat(self, payload: dict[str, Any]) -> _Answer:
        message = {"role": "assistant", "content": self._reply_text(payload.get("messages", []))}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        body = {"id": "chatcmpl-fake", "object": "chat.completion", "choices": [choice], "usage": {}}
        return _json_answer(200, body)

    def _dashscope_embeddings(self, payload: dict[str, Any]) -> _Answer:
        texts = payload["input"]["texts"]
        parameters = payload.get("parameters") or {}
        dimension = self.embedding_dim or parameters.get("dimension") or DEFAULT_DASHSCOPE_DIMENSION
        items = [{"text_index": i, "embedding": fake_vector(t, dimension)} for i, t in enumerate(texts)]
        body = {"output": {"embeddings": items[::-1]}, "usage": {"total_tokens": 1}, "request_id": "fake"}
        return _json_answer(200, body)

    def _dashscope_generation(self, payload: dict[str, Any]) -> _Answer:
        content = self._reply_text(payload["input"].get("messages", []))
        choice = {"finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        return _json_answer(200, {"output": {"choices": [choice]}, "usage": usage, "request_id": "fake"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 drops connections when a test fires many at once; the kernel then
    # retries them a second later, which reads as a slow client.
    request_queue_size = 128
    fake: FakeModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout) closes its socket; writing to it then fails. Not news."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: tests read `.requests`, not stderr."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        fake = self.server.fake
        fake._record(RecordedRequest("POST", self.path, dict(self.headers.items()), body))
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        answer = fake.answer(self.path, payload)
        if answer is None:
            return
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(answer.body)
