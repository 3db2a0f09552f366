#!/usr/bin/env python3
"""A reward server for scorer_test's http cases: POST {"id", "prompt", "response", "answer"},
answer {"id", "reward": len(response)}, except for these responses:
  status500  always 500;  flaky  500 the first time, then good;  slow  2 s, then good;
  notjson    a body that is not JSON;  big  a reward of 1e9 (out of range);
  deep       a reward nested a million arrays deep;
  true, false, dict, dictbool   the rewards true, false, {"score": 0.25, "acc": true} and
             {"score": true} (read as a command program's are).
Usage: reward_server.py PORT_FILE (it listens on a free port of 127.0.0.1 and writes it there)."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

seen = set()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        response = req["response"]
        if response == "status500" or (response == "flaky" and req["id"] not in seen):
            seen.add(req["id"])
            return self.reply(500, "{}")
        if response == "slow":
            time.sleep(2)
        if response == "notjson":
            return self.reply(200, "oops")
        if response == "deep":
            deep = "[" * 1000000 + "]" * 1000000
            return self.reply(200, '{"id": %s, "reward": %s}' % (json.dumps(req["id"]), deep))
        as_written = {"true": True, "false": False, "dict": {"score": 0.25, "acc": True},
                      "dictbool": {"score": True}}
        reward = 1e9 if response == "big" else as_written.get(response, len(response))
        self.reply(200, json.dumps({"id": req["id"], "reward": reward}))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
