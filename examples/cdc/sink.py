#!/usr/bin/env python3
"""A tiny HTTP receiver for the capture example: it answers 200 to every POST and prints one JSON
line per request (arrival time, path, the QueueBox headers and the body), to stdout and, with
--out, appended to a file that smoke.sh reads.

    python3 examples/cdc/sink.py                  # listens on 127.0.0.1:9999
    python3 examples/cdc/sink.py --port 9001 --out /tmp/received.jsonl

Python 3 standard library only.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WRITE_LOCK = threading.Lock()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--out", help="append each request as a JSON line to this file")
    args = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            record = {
                "at": round(time.time(), 3),
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()
                            if k.lower().startswith("x-")},
                "body": body,
            }
            line = json.dumps(record, sort_keys=True)
            with WRITE_LOCK:
                print(line, flush=True)
                if args.out:
                    with open(args.out, "a", encoding="utf-8") as out:
                        out.write(line + "\n")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            # A readiness probe for scripts: GET / answers 200.
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"sink listening on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
