"""Inbound cases of scripts/check-signatures.sh: every provider kind, signed with the provider's
own library (or its published algorithm), against the running binary. Prints one line per kind;
exits 1 on the first wrong answer."""

import json
import random
import sys
import uuid

from common import (SECRETS, WRONG, Conn, npm_sign, now, psql, shopify_sign, slack_sign,
                    stored, stripe_header, sw_sign_py)

SIG_HEADER = {"sw": "webhook-signature", "stripe": "Stripe-Signature",
              "github": "X-Hub-Signature-256", "shopify": "X-Shopify-Hmac-Sha256",
              "slack": "X-Slack-Signature"}
HAS_TIMESTAMP = {"sw", "stripe", "slack"}
conn = Conn()
failures = []
cases = {}


def entry(kind, secret, ts, body, key, lib):
    """The signature entry alone (`v1,..`, `v1=..`, `sha256=..`, base64, `v0=..`)."""
    if kind == "sw":
        if lib == "npm":
            return npm_sign([{"lib": "standardwebhooks", "secret": secret, "id": key,
                              "timestamp": ts, "body": body}])[0]
        return sw_sign_py(secret, key, ts, body)
    if kind == "stripe":
        return stripe_header(secret, body, ts).split(",", 1)[1]
    if kind == "github":
        return npm_sign([{"lib": "octokit", "secret": secret, "body": body}])[0]
    if kind == "shopify":
        return shopify_sign(secret, body)
    return slack_sign(secret, ts, body)


def request(kind, key, ts, body, signature):
    """The headers of one request of `kind` with the signature header value given."""
    if kind == "sw":
        return [("webhook-id", key), ("webhook-timestamp", str(ts)), ("webhook-signature", signature)]
    if kind == "stripe":
        return [("Stripe-Signature", f"t={ts},{signature}")]
    if kind == "github":
        return [("X-GitHub-Delivery", key), ("X-GitHub-Event", "push"),
                ("X-Hub-Signature-256", signature)]
    if kind == "shopify":
        return [("X-Shopify-Webhook-Id", key), ("X-Shopify-Topic", "orders/create"),
                ("X-Shopify-Hmac-Sha256", signature)]
    return [("X-Slack-Request-Timestamp", str(ts)), ("X-Slack-Signature", signature)]


def message(kind):
    """A fresh body and the idempotency key the source must store it under."""
    key = f"{kind}-{uuid.uuid4()}"
    if kind == "stripe":
        key = "evt_" + uuid.uuid4().hex
        return json.dumps({"id": key, "object": "event", "type": "charge.succeeded"}), key
    if kind == "slack":
        return json.dumps({"type": "event_callback", "event_id": key}), key
    return json.dumps({"type": "thing.happened", "n": random.randint(0, 10**9)}), key


def join(kind, entries):
    return (" " if kind == "sw" else ",").join(entries)


def change_one_byte(kind, value):
    """`value` with one character of its signature changed to another of the same alphabet."""
    prefix = {"sw": 3, "stripe": 3, "github": 7, "shopify": 0, "slack": 3}[kind]
    alphabet = ("0123456789abcdef" if kind in ("stripe", "github", "slack")
                else "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    # Not the last characters of a base64 value, whose low bits may be padding.
    at = prefix + random.randrange(0, 30)
    replacement = random.choice([c for c in alphabet if c != value[at].lower() and c != value[at]])
    return value[:at] + replacement + value[at + 1:]


def expect(kind, case, status, headers, body, want_status, want_text=None, key=None, count=None):
    got_status, got_body = conn.post(f"/{kind}", headers, body.encode())
    ok = got_status == want_status and (want_text is None or want_text in got_body)
    secrets = list(SECRETS[kind]) + [WRONG[kind]]
    if got_status == 401:
        leaked = [s for s in secrets if s in got_body]
        leaked += [v for n, v in headers if n == SIG_HEADER[kind] and v in got_body]
        if leaked:
            ok = False
            got_body += " (LEAKS A SECRET OR SIGNATURE)"
    if key is not None and count is not None and stored(kind, key) != count:
        ok = False
        got_body += f" (stored rows for key: {stored(kind, key)}, expected {count})"
    cases[kind] = cases.get(kind, 0) + 1
    if not ok:
        failures.append(f"{kind} {case}: got {got_status} {got_body!r}, expected {want_status}"
                        f"{' with ' + repr(want_text) if want_text else ''}")


def run_kind(kind, libs):
    old, new = SECRETS[kind]
    for lib in libs:
        # Valid, signed with the new secret; then the same request again: a duplicate.
        body, key = message(kind)
        ts = now()
        headers = request(kind, key, ts, body, entry(kind, new, ts, body, key, lib))
        expect(kind, f"valid ({lib})", 202, headers, body, 202, "messageId", key, 1)
        expect(kind, f"replay ({lib})", 200, headers, body, 200, '"duplicate"', key, 1)
        # Rotation: the old secret still works.
        body, key = message(kind)
        headers = request(kind, key, ts, body, entry(kind, old, ts, body, key, lib))
        expect(kind, f"rotated secret ({lib})", 202, headers, body, 202, "messageId", key, 1)
    lib = libs[0]
    # Wrong secret.
    body, key = message(kind)
    ts = now()
    headers = request(kind, key, ts, body, entry(kind, WRONG[kind], ts, body, key, lib))
    expect(kind, "wrong secret", 401, headers, body, 401, "signature mismatch", key, 0)
    # Tampered body: signed, then one byte of the body changed.
    body, key = message(kind)
    headers = request(kind, key, ts, body, entry(kind, new, ts, body, key, lib))
    tampered = body.replace('"', "'", 1) if kind != "stripe" else body.replace("event", "evenT", 1)
    expect(kind, "tampered body", 401, headers, tampered, 401, "signature mismatch", key, 0)
    # Old timestamp, correctly signed.
    if kind in HAS_TIMESTAMP:
        body, key = message(kind)
        old_ts = now() - 600
        headers = request(kind, key, old_ts, body, entry(kind, new, old_ts, body, key, lib))
        expect(kind, "old timestamp", 401, headers, body, 401, "timestamp outside tolerance", key, 0)
    # Missing signature header.
    body, key = message(kind)
    headers = request(kind, key, ts, body, entry(kind, new, ts, body, key, lib))
    headers = [(n, v) for n, v in headers if n != SIG_HEADER[kind]]
    expect(kind, "missing header", 401, headers, body, 401, f"missing header {SIG_HEADER[kind]}",
           key, 0)
    # One byte changed in the signature header.
    body, key = message(kind)
    good = entry(kind, new, ts, body, key, lib)
    if kind in ("sw", "stripe"):
        # Several entries: any one that matches is enough...
        wrong = entry(kind, WRONG[kind], ts, body, key, lib)
        headers = request(kind, key, ts, body, join(kind, [change_one_byte(kind, good),
                                                           entry(kind, old, ts, body, key, lib)]))
        expect(kind, "multi-signature, one entry changed, another valid", 202, headers, body, 202,
               "messageId", key, 1)
        # ...and one changed byte in the only matching entry fails.
        body, key = message(kind)
        good = entry(kind, new, ts, body, key, lib)
        headers = request(kind, key, ts, body, join(kind, [wrong, change_one_byte(kind, good)]))
        expect(kind, "multi-signature, one byte changed", 401, headers, body, 401,
               "signature mismatch", key, 0)
    else:
        headers = request(kind, key, ts, body, change_one_byte(kind, good))
        expect(kind, "one byte changed in the signature", 401, headers, body, 401,
               "signature mismatch", key, 0)


random.seed(20261203)
run_kind("sw", ["py", "npm"])
run_kind("stripe", ["py"])
run_kind("github", ["npm"])
run_kind("shopify", ["py"])
run_kind("slack", ["py"])

# The event type comes from X-GitHub-Event and X-Shopify-Topic.
for kind, event in (("github", "push"), ("shopify", "orders/create")):
    types = psql(f"SELECT DISTINCT event_type FROM inbox WHERE source = '{kind}'")
    if types != event:
        failures.append(f"{kind}: stored event types {types!r}, expected {event!r}")

# The documented vectors, at sources with a tolerance wide enough for their old timestamps.
SW_DOC = ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
          '{"test": 2432232314}', "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
status, text = conn.post("/swdoc", [("webhook-id", SW_DOC[1]), ("webhook-timestamp", SW_DOC[2]),
                                    ("webhook-signature", SW_DOC[4])], SW_DOC[3].encode())
if status not in (200, 202):
    failures.append(f"Standard Webhooks reference vector: {status} {text}")
SLACK_BODY = ("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
              "G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
              "collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700"
              "885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c"
              "447fce8b6703c")
# The form body passes the signature and is then refused as not JSON (400, not 401).
status, text = conn.post("/slackdoc", [
    ("X-Slack-Request-Timestamp", "1531420618"),
    ("X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503")],
    SLACK_BODY.encode())
if status != 400 or "Invalid JSON" not in text:
    failures.append(f"Slack documented vector: {status} {text} (expected 400 Invalid JSON)")
status, text = conn.post("/slackdoc", [
    ("X-Slack-Request-Timestamp", "1531420618"),
    ("X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b504")],
    SLACK_BODY.encode())
if status != 401:
    failures.append(f"Slack documented vector with one byte changed: {status} {text}")
status, text = conn.post("/ghdoc", [
    ("X-GitHub-Delivery", "doc-1"),
    ("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")],
    b"Hello, World!")
if status != 400 or "Invalid JSON" not in text:
    failures.append(f"GitHub documented vector: {status} {text} (expected 400 Invalid JSON)")

for kind, count in cases.items():
    print(f"inbound {kind}: {count} cases")
print("inbound documented vectors: Standard Webhooks, Slack, GitHub: 4 cases")
if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
