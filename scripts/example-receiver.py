#!/usr/bin/env python3
"""A tiny HTTP receiver for the quick start: prints every delivery QueueBox makes and answers 200.

    python3 scripts/example-receiver.py          # listens on 127.0.0.1:9999
"""
import http.server
import sys

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 9999


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        print(
            f"{self.path} id={self.headers.get('X-Message-Id')} topic={self.headers.get('X-Topic')} "
            f"key={self.headers.get('X-Message-Key')} attempt={self.headers.get('X-Attempt')} "
            f"body={body.decode('utf-8', 'replace')}",
            flush=True,
        )
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


print(f"listening on 127.0.0.1:{PORT}", flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Receiver).serve_forever()
