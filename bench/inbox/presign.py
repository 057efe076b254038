"""Pre-signed requests for the verification cost in run-ingest.sh (targets queuebox-sig and
queuebox-verify): one line per request, `webhook-id TAB webhook-timestamp TAB webhook-signature TAB
body`, signed with Standard Webhooks (HMAC-SHA256 of `id.timestamp.body`, base64) under SECRET.

  python3 presign.py FILE COUNT PREFIX SECRET_BASE64
"""
import base64
import hashlib
import hmac
import sys
import time

path, count, prefix, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
key = base64.b64decode(secret)
ts = str(int(time.time()))
with open(path, "w") as out:
    for n in range(count):
        msg_id = f"{prefix}-{n}"
        body = ('{"id":"%s","type":"created","data":{"amount":1234,"currency":"EUR","customer":"c-%d"}}'
                % (msg_id, n % 1000))
        mac = hmac.new(key, f"{msg_id}.{ts}.{body}".encode(), hashlib.sha256).digest()
        out.write(f"{msg_id}\t{ts}\tv1,{base64.b64encode(mac).decode()}\t{body}\n")
