"""Runs two real DSH turns against a local fake Anthropic Messages server (no model)."""
import json, os, sys, threading, glob
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLIES = ["Hello from the fake model.", "A second answer."]
count = {"n": 0}

class Fake(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        text = REPLIES[count["n"] % len(REPLIES)]
        count["n"] += 1
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        def ev(name, data):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        ev("message_start", {"type": "message_start", "message": {"id": f"msg_{count['n']}", "type": "message", "role": "assistant", "model": "fake", "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 0}}})
        ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        for part in (text[: len(text)//2], text[len(text)//2:]):
            ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}})
        ev("content_block_stop", {"type": "content_block_stop", "index": 0})
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}})
        ev("message_stop", {"type": "message_stop"})

server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]

from deepseek_harness import DeepSeekHarness, DeepSeekHarnessConfig
home, profile, sid = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["DSH_HOME"] = home
os.environ["DSH_TELEMETRY_DISABLED"] = "1"
cfg = DeepSeekHarnessConfig(profile=profile, dsh_home=home, cwd="/tmp/dshgen-dshfmt/work",
    base_url=f"http://127.0.0.1:{port}", api_key="fake",
    env={"DSH_HOME": home, "DSH_TELEMETRY_DISABLED": "1"}, shutdown_timeout_seconds=15.0)
with DeepSeekHarness(cfg) as h:
    s = h.start_session(sid)
    for prompt in ["hi", "and again"]:
        r = s.run(prompt)
        print("reply:", r.final_response, file=sys.stderr)
for f in glob.glob(f"{home}/sessions/**/*", recursive=True):
    print(f)
