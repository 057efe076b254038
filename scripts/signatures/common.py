"""Shared by the signature checks of scripts/check-signatures.sh: secrets, sending raw requests,
signing with the providers' own libraries, reading the inbox table."""

import base64
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import time
from datetime import datetime, timezone

import stripe
from standardwebhooks.webhooks import Webhook

PORT = int(os.environ["QB_SIG_PORT"])
PG_URL = os.environ["QB_SIG_PG_URL"]
NPM_DIR = os.environ["QB_SIG_NPM_RUN"]

# One old and one new secret per kind: the sources are configured with both (a rotation).
SECRETS = {
    "sw": ("whsec_" + base64.b64encode(b"standard-webhooks-old-secret!").decode(),
           "whsec_" + base64.b64encode(b"standard-webhooks-new-secret!").decode()),
    "stripe": ("whsec_stripe_old_0123456789", "whsec_stripe_new_9876543210"),
    "github": ("github-old-secret", "github-new-secret"),
    "shopify": ("shpss_shopify_old_secret", "shpss_shopify_new_secret"),
    "slack": ("8f742231b10e8888abcd99yyyzzz0001", "8f742231b10e8888abcd99yyyzzz0002"),
}
WRONG = {
    "sw": "whsec_" + base64.b64encode(b"not-a-configured-secret").decode(),
    "stripe": "whsec_wrong",
    "github": "wrong-secret",
    "shopify": "shpss_wrong",
    "slack": "0000000000000000000000000000ffff",
}


class Conn:
    """One keep-alive connection; sends headers in the order given, the body as bytes."""

    def __init__(self):
        self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)

    def post(self, path, headers, body):
        for attempt in range(2):
            try:
                self.conn.putrequest("POST", "/inbox" + path, skip_accept_encoding=True)
                for name, value in headers:
                    self.conn.putheader(name, value)
                self.conn.putheader("Content-Type", "application/json")
                self.conn.putheader("Content-Length", str(len(body)))
                self.conn.endheaders(body)
                response = self.conn.getresponse()
                return response.status, response.read().decode("utf-8", "replace")
            except (http.client.HTTPException, ConnectionError):
                if attempt:
                    raise
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        raise AssertionError("unreachable")


def psql(sql):
    out = subprocess.run(["psql", PG_URL, "-qAt", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def stored(source, key):
    return int(psql(f"SELECT count(*) FROM inbox WHERE source = '{source}' AND idempotency_key = '{key}'"))


def now():
    return int(time.time())


# --- the official libraries -------------------------------------------------------------------

def sw_sign_py(secret, msg_id, timestamp, body):
    return Webhook(secret).sign(msg_id, datetime.fromtimestamp(timestamp, tz=timezone.utc), body)


def stripe_header(secret, body, timestamp):
    # stripe-python's own helper for signing test payloads.
    return stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=timestamp)


def npm_sign(jobs):
    """Signs a batch with the npm packages (standardwebhooks, @octokit/webhooks-methods)."""
    if not jobs:
        return []
    out = subprocess.run(["node", os.path.join(NPM_DIR, "sign.mjs")], input=json.dumps(jobs),
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


# --- the published algorithms (Shopify, Slack) -------------------------------------------------

def shopify_sign(secret, body):
    return base64.b64encode(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()).decode()


def slack_sign(secret, timestamp, body):
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
