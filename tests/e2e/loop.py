"""Our side of the oracle: the test plays the engine side of the disaggregated pipeline.

For one client body: `POST {engine}/v1/chat/completions/render` (or `/v1/completions/render`)
→ the rendered request to `{engine}/inference/v1/generate` → every SSE event one ChunkRecord
on the input topic (`Publisher`; seq 0 carries the request context, `[DONE]` becomes `end`,
an engine error `abort`) → a real `derender-worker run` → its outputs read back with
`OutputReader`, following the request id on the reply partition its seq-0 record named →
the body a client gets: the SSE `data:` lines ending `data: [DONE]`, or the whole response.

`Loop.client()` is an `openai.OpenAI` whose HTTP is answered by this, so the same SDK code
reads our answer and the coupled server's (tests/e2e/oracle.py). Kafka's clients live on
an event loop thread of their own; the SDK's calls wait on it, bounded.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import httpx2
import openai

from worker import Output, OutputReader, Publisher

T = TypeVar("T")

# One request through the loop: render, generate, the worker, every output read back.
ANSWER_TIMEOUT_S = 90.0
HTTP_TIMEOUT = httpx2.Timeout(60.0, connect=5.0)
# vLLM's default `max_tokens` of a completion; the render leaves out a `max_tokens` equal to
# 16 (its default), and generate would then run to the context's end.
COMPLETION_DEFAULT_MAX_TOKENS = 16
JSON, SSE = "application/json", "text/event-stream"


class EngineRefused(Exception):
    """The engine answered a request with an error before generating: the client gets it
    as it is (status, body and media type)."""

    def __init__(self, status: int, body: bytes, media: str = JSON) -> None:
        super().__init__(f"{status}: {body[:200]!r}")
        self.status = status
        self.body = body
        self.media = media


@dataclass
class Answer:
    """What the loop did for one request: what it sent and what came back."""

    request_id: str
    status: int
    body: bytes  # what the client gets
    media: str = JSON
    generate_request: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)

    def generated_ids(self) -> list[int]:
        """Every token id the engine generated (all choices)."""
        ids: list[int] = []
        for r in self.records:
            for c in (r.get("generate_chunk") or {}).get("choices") or []:
                ids.extend(c.get("token_ids") or [])
            for c in (r.get("generate_response") or {}).get("choices") or []:
                ids.extend(c.get("token_ids") or [])
        return ids


@dataclass
class Options:
    """How the engine side treats a request. `engine_stop`: keep the client's `stop` in
    the generate request (this engine applies it); False leaves stop strings to the worker
    alone, as a tokens-only engine would."""

    engine_stop: bool = True
    # A whole answer made of a streamed generate call (the gateway's way; this loop calls
    # generate without streaming for one).
    whole_from_stream: bool = False


class Loop:
    """Render → generate → Kafka → the worker → Kafka, for one client body at a time."""

    def __init__(
        self,
        engine_url: str,
        bootstrap: str,
        input_topic: str,
        output_topic: str,
        reply_partitions: Sequence[int] = (),
    ) -> None:
        self.engine_url = engine_url
        # As a gateway replica: each request names one of these output partitions, in
        # turn, as its `reply_partition`, and only they are read. Empty: no reply routing
        # (outputs on their key's partition, every partition read).
        self.reply_partitions = list(reply_partitions)
        self._turn = 0
        self.bootstrap = bootstrap
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.options = Options()
        self.answers: list[Answer] = []
        # Says why the loop cannot answer (the worker died), or None.
        self.worker_check: Callable[[], str | None] = lambda: None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="e2e-loop")
        self._http: httpx2.AsyncClient | None = None
        self._pub: Publisher | None = None
        self._reader: OutputReader | None = None

    # --- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> Loop:
        self._thread.start()
        try:
            self._run(self._start(), 60)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def _start(self) -> None:
        self._http = httpx2.AsyncClient(timeout=HTTP_TIMEOUT)
        self._pub = Publisher(self.bootstrap, self.input_topic)
        await self._pub.__aenter__()
        # Follows no request until one is sent; started before any is published.
        self._reader = OutputReader(
            self.bootstrap,
            self.output_topic,
            request_ids=[],
            partitions=self.reply_partitions or None,
        )
        await self._reader.start()

    async def _close(self) -> None:
        if self._reader is not None:
            await self._reader.stop()
        if self._pub is not None:
            await self._pub.__aexit__(None, None, None)
        if self._http is not None:
            await self._http.aclose()

    def close(self) -> None:
        if self._thread.is_alive():
            try:
                self._run(self._close(), 30)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(10)
        self._loop.close()

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    # --- one request -----------------------------------------------------------------

    def answer(self, api: str, body: dict[str, Any]) -> Answer:
        """The client's answer to `body` (`api`: "chat" or "completion"), bounded."""
        if why := self.worker_check():
            raise RuntimeError(why)
        answer = self._run(self._answer(api, body), ANSWER_TIMEOUT_S)
        self.answers.append(answer)
        return answer

    async def _answer(self, api: str, body: dict[str, Any]) -> Answer:
        assert self._http is not None and self._pub is not None and self._reader is not None
        chat = api == "chat"
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        path = "/v1/chat/completions/render" if chat else "/v1/completions/render"
        rendered = await self._http.post(self.engine_url + path, json=body)
        if rendered.status_code >= 400:  # vLLM's answer reaches the client unchanged
            return Answer(rid, rendered.status_code, rendered.content)
        gen = rendered.json()
        if not chat:
            (gen,) = gen  # one prompt
        gen = self._generate_request(api, body, gen)
        context: dict[str, Any] = {
            "api": api,
            "model": body.get("model"),
            "created": int(time.time()),
            "prompt_token_ids": gen["token_ids"],
            "prompt_tokens": len(gen["token_ids"]),
            "chat_request" if chat else "completion_request": body,
        }
        if self.reply_partitions:
            context["reply_partition"] = self.reply_partitions[self._turn]
            self._turn = (self._turn + 1) % len(self.reply_partitions)
        answer = Answer(rid, 200, b"", generate_request=gen)
        self._reader.follow(rid)  # before its first record goes out
        try:
            if gen["stream"]:
                await self._stream(rid, gen, context, answer)
            else:
                await self._whole(rid, gen, context, answer)
            await self._pub.flush()
            answer.outputs = await self._outputs(rid, gen["stream"])
        except EngineRefused as e:
            answer.status, answer.body, answer.media = e.status, e.body, e.media
            return answer
        finally:
            self._reader.forget(rid)
        if gen["stream"]:
            answer.body = b"".join(out.sse() for out in answer.outputs)
            answer.media = SSE
        else:
            (out,) = answer.outputs
            answer.body = out.value
            answer.status = 400 if out.kind == "error" else 200
        return answer

    def _generate_request(
        self, api: str, body: dict[str, Any], rendered: dict[str, Any]
    ) -> dict[str, Any]:
        gen = dict(rendered)
        params = gen["sampling_params"] = dict(gen["sampling_params"])
        if params.get("max_tokens") is None:
            # The render drops a `max_tokens` equal to its default (16): put it back.
            default = None if api == "chat" else COMPLETION_DEFAULT_MAX_TOKENS
            wanted = body.get("max_completion_tokens", body.get("max_tokens", default))
            if wanted is not None:
                params["max_tokens"] = wanted
        if not self.options.engine_stop:
            params.pop("stop", None)
        stream = bool(body.get("stream"))
        gen["stream"] = stream
        # The usage event feeds the worker's usage chunk; a whole answer carries usage.
        gen["stream_options"] = {"include_usage": True} if stream else None
        return gen

    async def _stream(
        self, rid: str, gen: dict[str, Any], context: dict[str, Any], answer: Answer
    ) -> None:
        assert self._http is not None
        url = self.engine_url + "/inference/v1/generate"
        try:
            async with self._http.stream("POST", url, json=gen) as resp:
                if resp.status_code >= 400:
                    raise EngineRefused(resp.status_code, await resp.aread())
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        await self._send(answer, {"request_id": rid, "type": "end"})
                        return
                    event = json.loads(data)
                    if "error" in event and not answer.records:
                        # The engine checks some sampling parameters once the stream is
                        # open (an error event under status 200), as its coupled server
                        # does: the client gets the same stream.
                        sse = b"data: " + data.encode() + b"\n\ndata: [DONE]\n\n"
                        raise EngineRefused(resp.status_code, sse, SSE)
                    if "error" in event:
                        raise RuntimeError(f"the engine failed mid-stream: {data}")
                    record = {"request_id": rid, "generate_chunk": event}
                    if not answer.records:
                        record.update(context)
                    await self._send(answer, record)
            raise RuntimeError("the generate stream ended without [DONE]")
        except BaseException:
            if answer.records:  # an opened request is closed, and the client gets an error
                await self._send(answer, {"request_id": rid, "type": "abort"})
            raise

    async def _whole(
        self, rid: str, gen: dict[str, Any], context: dict[str, Any], answer: Answer
    ) -> None:
        assert self._http is not None
        resp = await self._http.post(self.engine_url + "/inference/v1/generate", json=gen)
        if resp.status_code >= 400:
            raise EngineRefused(resp.status_code, resp.content)
        record = {"request_id": rid, "type": "response", **context}
        record["generate_response"] = resp.json()
        await self._send(answer, record)

    async def _send(self, answer: Answer, record: dict[str, Any]) -> None:
        assert self._pub is not None
        answer.records.append(record)
        await self._pub.record(record)

    async def _outputs(self, rid: str, stream: bool) -> list[Output]:
        """A stream's outputs up to its `[DONE]`; a whole answer's one output (its
        response, or an error)."""
        assert self._reader is not None
        outputs: list[Output] = []
        while True:
            out = await self._reader.read(timeout_s=ANSWER_TIMEOUT_S)
            if out is None:
                raise TimeoutError(f"no output for {rid} after {len(outputs)} outputs")
            assert out.request_id == rid, (out.request_id, rid)  # one request at a time
            outputs.append(out)
            if out.end or not stream:
                return outputs

    # --- the SDK's view --------------------------------------------------------------

    def client(self) -> openai.OpenAI:
        """An `openai.OpenAI` whose requests this loop answers."""

        def handle(request: httpx2.Request) -> httpx2.Response:
            body = json.loads(request.content)
            api = "chat" if request.url.path.endswith("/chat/completions") else "completion"
            answer = self.answer(api, body)
            return httpx2.Response(
                answer.status, headers={"content-type": answer.media}, content=answer.body
            )

        return openai.OpenAI(
            api_key="e2e",
            base_url="http://derender-loop.test/v1",
            http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
            max_retries=0,
        )
