"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1, enough for DeepSeek Harness
to run real turns: each `POST /v1/messages` is recorded and answered, as server-sent events,
with the next scripted reply (text, or a tool call)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def text(words: str) -> dict:
    return {"type": "text", "text": words}


def tool_use(call_id: str, name: str, arguments: dict) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


class FakeAnthropic:
    """`replies`: one list of content blocks per request, in the order requests arrive."""

    def __init__(self, replies: list[list[dict]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                with fake.lock:
                    fake.requests.append(body)
                    blocks = fake.replies.pop(0) if fake.replies else [text("(script ended)")]
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for name, data in stream(blocks):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stream(blocks: list[dict]):
    """The server-sent events of one reply made of `blocks`."""
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": [],
        "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 0}}}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}}
    yield "message_stop", {"type": "message_stop"}
