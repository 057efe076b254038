#!/usr/bin/env python3
"""Runs scripts/example-receiver.py (mounted at /app/example-receiver.py) inside a container.

That script listens on 127.0.0.1, which inside a container is the container's own loopback, out of
QueueBox's reach. This wrapper makes its server bind every interface instead, then runs it as is.
"""
import http.server
import runpy
import sys

PORT = 9999


class EveryInterface(http.server.ThreadingHTTPServer):
    def __init__(self, address, handler):
        super().__init__(("0.0.0.0", address[1]), handler)


http.server.ThreadingHTTPServer = EveryInterface
print(f"(in the container the receiver binds 0.0.0.0:{PORT})", flush=True)
sys.argv = ["example-receiver.py", str(PORT)]
runpy.run_path("/app/example-receiver.py", run_name="__main__")
