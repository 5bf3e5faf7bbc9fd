"""A stand-in vLLM engine at the HTTP seam: render, generate (SSE of real token ids),
abort and the model list, as vLLM's scale-out endpoints answer them.

The answer to a chat is `ANSWER.format(text=<the last message>)` (a completion's: the
prompt; a Responses request's: its `input` text or last input message; a Messages
request's: its last message) encoded by the real DeepSeek V4 tokenizer, streamed a few
ids per event, then a usage event and `[DONE]`. A message starting with a mode word
changes what generate does: `drop` (the connection breaks after 3 events), `error` (an
error event after 2), `slow` (events 50 ms apart, a long answer), `hold` (3 events, then
nothing until the request is aborted or its stream closed, for at most a minute). It
runs on its own thread and event loop, and keeps every generate request and every abort
it received, and counts the tokens it generated per request: an abort or a closed stream
stops that request's generation.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from tokenizers import Tokenizer

from tests.support.threaded_app import ThreadedApp

MODEL = "deepseek-v4"
ANSWER = "You said: {text}. Bonjour 你好 😀 and goodbye."
HOLD_S = 60.0
SLOW_ANSWER = " ".join(["tick tock"] * 200)
ENGINE_PREFIX = "generate-tokens-"


def vllm_error(message: str, status: int = 400) -> JSONResponse:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}}
    return JSONResponse(body, status)


def _text(content: Any) -> str:
    """A message's text: a string, or its text parts joined (Responses, Messages)."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


class StandInEngine:
    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.generated: list[dict[str, Any]] = []  # every generate request's body
        self.aborted: list[str] = []  # every request id abort_requests was given
        self.tokens: dict[str, int] = {}  # engine request id: tokens generated
        self.url = ""
        self._served: ThreadedApp | None = None

    def answer_text(self, text: str) -> str:
        return SLOW_ANSWER if text.startswith("slow") else ANSWER.format(text=text)

    def answer_ids(self, text: str) -> list[int]:
        return list(self.tok.encode(self.answer_text(text), add_special_tokens=False).ids)

    # -- the endpoints ---------------------------------------------------------------------

    def _rendered(self, body: dict[str, Any], text: str, prefix: str) -> dict[str, Any]:
        prompt = f"<｜User｜>{text}<｜Assistant｜></think>"
        params: dict[str, Any] = {"temperature": body.get("temperature", 1.0)}
        # (vLLM's render leaves out a max_tokens equal to its default, 16.)
        if body.get("max_tokens") not in (None, 16):
            params["max_tokens"] = body["max_tokens"]
        return {
            "request_id": f"{prefix}-rendered",
            "token_ids": list(self.tok.encode(prompt, add_special_tokens=False).ids),
            "sampling_params": params,
            "model": body.get("model"),
            "stream": False,
            "x_text": text,  # (what generate answers: the stand-in's own field)
        }

    async def render_chat(self, request: Request) -> Response:
        body = await request.json()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return vllm_error("messages: Field required")
        if body.get("model") != MODEL:
            return vllm_error(f"The model `{body.get('model')}` does not exist.", 404)
        return JSONResponse(self._rendered(body, str(messages[-1]["content"]), "chatcmpl"))

    async def render_responses(self, request: Request) -> Response:
        body = await request.json()
        given = body.get("input")
        if given is None:
            return vllm_error("input: Field required")
        if body.get("model") != MODEL:
            return vllm_error(f"The model `{body.get('model')}` does not exist.", 404)
        text = given if isinstance(given, str) else _text(given[-1].get("content"))
        rendered = self._rendered(body, text, "resp")
        if body.get("max_output_tokens") is not None:
            rendered["sampling_params"]["max_tokens"] = body["max_output_tokens"]
        return JSONResponse(rendered)

    async def render_messages(self, request: Request) -> Response:
        body = await request.json()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or "max_tokens" not in body:
            return vllm_error("messages and max_tokens: Field required")
        if body.get("model") != MODEL:
            return vllm_error(f"The model `{body.get('model')}` does not exist.", 404)
        return JSONResponse(self._rendered(body, _text(messages[-1].get("content")), "msg"))

    async def render_completion(self, request: Request) -> Response:
        body = await request.json()
        prompts = body.get("prompt")
        if prompts is None:
            return vllm_error("prompt: Field required")
        prompts = prompts if isinstance(prompts, list) else [prompts]
        return JSONResponse([self._rendered(body, str(p), "cmpl") for p in prompts])

    async def generate(self, request: Request) -> Response:
        body = await request.json()
        self.generated.append(body)
        text = body["x_text"]
        ids = self.answer_ids(text)
        limit = body["sampling_params"].get("max_tokens")
        finish = "stop"
        if limit is not None and limit < len(ids):
            ids, finish = ids[:limit], "length"
        rid = ENGINE_PREFIX + body["request_id"]
        return StreamingResponse(
            self._events(rid, text, ids, finish), media_type="text/event-stream"
        )

    async def _events(self, rid: str, text: str, ids: list[int], finish: str) -> AsyncIterator[str]:
        cuts = list(range(0, len(ids), 3))
        self.tokens[rid] = 0
        for n, start in enumerate(cuts):
            if rid in self.aborted:
                return
            if text.startswith("drop") and n == 3:
                raise ConnectionError("the stand-in engine drops the stream")
            if text.startswith("error") and n == 2:
                error = {"message": "the stand-in engine failed", "type": "InternalServerError",
                         "param": None, "code": 500}  # fmt: skip
                yield f"data: {json.dumps({'error': error})}\n\n"
                yield "data: [DONE]\n\n"
                return
            if text.startswith("hold") and n == 3:
                # (Still generating whenever a test acts, however late the client hears.)
                deadline = time.monotonic() + HOLD_S
                while rid not in self.aborted and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                if rid in self.aborted:
                    return
            if text.startswith("slow"):
                await asyncio.sleep(0.05)
            self.tokens[rid] += len(ids[start : start + 3])
            last = start + 3 >= len(ids)
            choice = {"index": 0, "token_ids": ids[start : start + 3], "logprobs": None,
                      "finish_reason": finish if last else None, "stop_reason": None}  # fmt: skip
            yield f"data: {json.dumps({'request_id': rid, 'choices': [choice], 'usage': None})}\n\n"
        usage = {"prompt_tokens": 5, "completion_tokens": len(ids), "total_tokens": 5 + len(ids)}
        yield f"data: {json.dumps({'request_id': rid, 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    async def abort(self, request: Request) -> Response:
        body = await request.json()
        self.aborted += body["request_ids"]
        return Response(status_code=200)

    async def models(self, request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]}
        )

    # -- its lifetime ----------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions/render", self.render_chat, methods=["POST"]),
                Route("/v1/completions/render", self.render_completion, methods=["POST"]),
                Route("/v1/responses/render", self.render_responses, methods=["POST"]),
                Route("/v1/messages/render", self.render_messages, methods=["POST"]),
                Route("/inference/v1/generate", self.generate, methods=["POST"]),
                Route("/inference/v1/abort_requests", self.abort, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    def __enter__(self) -> StandInEngine:
        self._served = ThreadedApp(self.app()).__enter__()
        self.url = self._served.url
        return self

    def __exit__(self, *exc: object) -> None:
        if self._served is not None:
            self._served.__exit__(*exc)
