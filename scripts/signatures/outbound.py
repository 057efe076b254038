"""Outbound check of scripts/check-signatures.sh: a receiver verifies every delivery of three
signed HTTP destinations with the official Python `standardwebhooks` package, across a retry
and a secret rotation, and records them for the TypeScript check (verify_outbound.ts).

  /old   signing secrets [OLD]        verifies under OLD only
  /both  signing secrets [NEW, OLD]   verifies under either (the rotation)
  /new   signing secrets [NEW]        verifies under NEW only

One /both message fails its first attempt (503): its retry must carry the same webhook-id (the
outbox row id) and a timestamp of its own attempt."""

import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import psql
from standardwebhooks.webhooks import Webhook

PORT = int(os.environ["QB_SIG_RECEIVER_PORT"])
OLD, NEW = os.environ["QB_SIG_OUT_OLD"], os.environ["QB_SIG_OUT_NEW"]
RECORD = sys.argv[1]
ACCEPTS = {"/old": ["old"], "/both": ["old", "new"], "/new": ["new"]}
HOOKS = {"old": Webhook(OLD), "new": Webhook(NEW)}
deliveries, problems = [], []
failed_once = set()
lock = threading.Lock()


class Receiver(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        headers = {name.lower(): value for name, value in self.headers.items()}
        received = time.time()
        for name, hook in HOOKS.items():
            try:
                hook.verify(body, headers)
                verified = True
            except Exception:  # the library's WebhookVerificationError
                verified = False
            if verified != (name in ACCEPTS[self.path]):
                with lock:
                    problems.append(f"python standardwebhooks: {self.path} {headers.get('webhook-id')}:"
                                    f" the {name} secret {'verified' if verified else 'did not verify'} it")
        with lock:
            deliveries.append({"path": self.path, "headers": headers, "body": body,
                               "accepts": ACCEPTS[self.path], "received": received})
            first = "failFirst" in body and headers.get("webhook-id") not in failed_once
            if first:
                failed_once.add(headers.get("webhook-id"))
        self.send_response(503 if first else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = ThreadingHTTPServer(("127.0.0.1", PORT), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()

run = uuid.uuid4().hex[:8]
rows = []
for path in ACCEPTS:
    for n in range(3):
        payload = {"run": run, "path": path, "n": n}
        if path == "/both" and n == 0:
            payload["failFirst"] = True
        rows.append((path, json.dumps(payload)))
values = ",".join(f"('sig{p.replace('/', '.')}', '{body}'::jsonb)" for p, body in rows)
psql(f"INSERT INTO outbox (topic, payload) VALUES {values}")
expected = len(rows) + 1  # one retry

deadline = time.time() + 30
while time.time() < deadline:
    sent = int(psql(f"SELECT count(*) FROM outbox WHERE payload->>'run' = '{run}' AND state = 'sent'"))
    if sent == len(rows) and len(deliveries) >= expected:
        break
    time.sleep(0.1)
server.shutdown()

ids = dict(line.split("|") for line in psql(
    f"SELECT payload->>'path' || ':' || (payload->>'n'), id FROM outbox WHERE payload->>'run' = '{run}'"
).splitlines())
if len(deliveries) != expected:
    problems.append(f"{len(deliveries)} deliveries, expected {expected} (9 rows and one retry)")
for d in deliveries:
    body = json.loads(d["body"])
    want_id = ids.get(f"{body['path']}:{body['n']}")
    if d["headers"].get("webhook-id") != want_id:
        problems.append(f"webhook-id {d['headers'].get('webhook-id')} is not the row id {want_id}")
    entries = d["headers"].get("webhook-signature", "").split(" ")
    if len(entries) != len(d["accepts"]) or not all(e.startswith("v1,") for e in entries):
        problems.append(f"{d['path']}: webhook-signature has {entries}, expected one v1 entry per secret")
    stamp = int(d["headers"].get("webhook-timestamp", "0"))
    if abs(stamp - d["received"]) > 5:
        problems.append(f"webhook-timestamp {stamp} is not the time of its attempt ({d['received']:.0f})")
retried = [d for d in deliveries if "failFirst" in d["body"]]
if len(retried) != 2 or len({d["headers"]["webhook-id"] for d in retried}) != 1:
    problems.append(f"the retried message arrived {len(retried)} times, with ids "
                    f"{[d['headers'].get('webhook-id') for d in retried]}")

with open(RECORD, "w") as out:
    json.dump(deliveries, out)
print(f"outbound python standardwebhooks: {len(deliveries)} deliveries (one retry with the same "
      f"webhook-id), {2 * len(deliveries)} checks")
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
