"""Property check of scripts/check-signatures.sh: random bodies, random header order and letter
case, random kinds; half the requests signed right, half broken by one random change. Every
right one must be stored (202) and every broken one refused (401): prints the counts of false
accepts and false rejects and exits 1 unless both are 0."""

import json
import random
import string
import sys
import uuid

from common import (SECRETS, WRONG, Conn, npm_sign, now, shopify_sign, slack_sign, stripe_header,
                    sw_sign_py)

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 20261203)
KINDS = ["sw", "stripe", "github", "shopify", "slack"]
SIG = {"sw": "webhook-signature", "stripe": "Stripe-Signature", "github": "X-Hub-Signature-256",
       "shopify": "X-Shopify-Hmac-Sha256", "slack": "X-Slack-Signature"}


def random_text():
    pools = [string.printable, "äöü€😀\u2028\u00a0\"\\/", "\u0001\u007f\t\n"]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(0, 40)))


def random_value(depth=0):
    choice = rng.randint(0, 6 if depth < 3 else 3)
    if choice == 0:
        return rng.randint(-10**12, 10**12)
    if choice == 1:
        return random_text()
    if choice == 2:
        return rng.choice([True, False, None, 1.5e300, -0.0])
    if choice == 3:
        return rng.random()
    if choice in (4, 5):
        return {random_text(): random_value(depth + 1) for _ in range(rng.randint(0, 5))}
    return [random_value(depth + 1) for _ in range(rng.randint(0, 5))]


def random_body(kind, key):
    document = {random_text(): random_value() for _ in range(rng.randint(0, 6))}
    if kind == "stripe":
        document["id"] = key
    if kind == "slack":
        document["event_id"] = key
    # Random spacing and escaping: the bytes are what is signed, not the document.
    text = json.dumps(document, ensure_ascii=rng.random() < 0.5,
                      indent=rng.choice([None, 0, 2]),
                      separators=rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")]))
    return text


def mutate(value, alphabet, start):
    at = start + rng.randrange(0, 20)
    others = [c for c in alphabet if c.lower() != value[at].lower()]
    return value[:at] + rng.choice(others) + value[at + 1:]


HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"

jobs, plans = [], []
for i in range(N):
    kind = rng.choice(KINDS)
    key = ("evt_" if kind == "stripe" else f"p{kind}-") + uuid.uuid4().hex
    body = random_body(kind, key)
    secret = rng.choice(SECRETS[kind])
    broken = i % 2 == 1
    change = rng.choice(["body", "signature", "secret", "timestamp", "header"]) if broken else None
    if change == "timestamp" and kind not in ("sw", "stripe", "slack"):
        change = "signature"
    ts = now() - (rng.choice([-900, 900]) if change == "timestamp" else rng.randint(-100, 100))
    if change == "secret":
        secret = WRONG[kind]
    plans.append((kind, key, body, secret, ts, change))
    if kind == "github":
        jobs.append({"lib": "octokit", "secret": secret, "body": body})
github_signatures = iter(npm_sign(jobs))

conn = Conn()
false_accepts = false_rejects = 0
examples = []
for kind, key, body, secret, ts, change in plans:
    if kind == "sw":
        signature = sw_sign_py(secret, key, ts, body)
        headers = [("webhook-id", key), ("webhook-timestamp", str(ts)), (SIG[kind], signature)]
    elif kind == "stripe":
        headers = [(SIG[kind], stripe_header(secret, body, ts))]
    elif kind == "github":
        headers = [("X-GitHub-Delivery", key), ("X-GitHub-Event", "push"),
                   (SIG[kind], next(github_signatures))]
    elif kind == "shopify":
        headers = [("X-Shopify-Webhook-Id", key), (SIG[kind], shopify_sign(secret, body))]
    else:
        headers = [("X-Slack-Request-Timestamp", str(ts)), (SIG[kind], slack_sign(secret, ts, body))]
    raw = body.encode()
    if change == "body":
        at = rng.randrange(len(raw))
        raw = raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1:]
    elif change == "signature":
        name, value = next(h for h in headers if h[0] == SIG[kind])
        if kind in ("sw", "shopify"):
            value = mutate(value, B64, 3 if kind == "sw" else 0)
        else:
            start = value.index("v1=") + 3 if kind == "stripe" else value.index("=") + 1
            value = mutate(value, HEX, start)
        headers = [(n, value if n == name else v) for n, v in headers]
    elif change == "header":
        headers = [h for h in headers if h[0] != SIG[kind]]
    # Unrelated headers, random order, random letter case.
    noise = string.ascii_letters + string.digits + " -_.,;="
    headers += [(f"X-Noise-{n}", "".join(rng.choice(noise) for _ in range(rng.randint(1, 30))).strip() or "x")
                for n in range(rng.randint(0, 3))]
    headers = [("".join(c.upper() if rng.random() < 0.5 else c.lower() for c in n), v)
               for n, v in headers]
    rng.shuffle(headers)
    status, text = conn.post(f"/{kind}", headers, raw)
    if change is None and status != 202:
        false_rejects += 1
        examples.append(f"false reject {kind}: {status} {text}")
    elif change is not None and status != 401:
        false_accepts += 1
        examples.append(f"false accept {kind} ({change}): {status} {text}")

print(f"property: {N} requests ({N - N // 2} signed right, {N // 2} broken), "
      f"{false_accepts} false accepts, {false_rejects} false rejects")
if false_accepts or false_rejects:
    print("\n".join(examples[:10]), file=sys.stderr)
    sys.exit(1)
