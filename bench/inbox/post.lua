-- wrk script of the ingestion bench: POST a small JSON event with an idempotency key per request.
--   wrk ... -s post.lua URL -- PREFIX MODE
-- MODE unique: every request carries a new key.
-- MODE half:   every other request repeats a key this thread sent 500 new keys earlier (by then
--              long committed: a thread has at most its connections in flight), so half the
--              requests are duplicates of stored rows.
-- done() prints one line: rps=.. p50_us=.. p99_us=.. requests=.. s202=.. s200=.. other=.. errors=..

local threads = {}
local counter = 1

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  prefix = args[1] or "k"
  mode = args[2] or "unique"
  n = 0
  s202, s200, other = 0, 0, 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local key
  if mode == "half" and n % 2 == 1 then
    local back = math.floor(n / 2) - 500
    if back < 0 then back = 0 end
    key = back
  else
    key = math.floor(n / 2)
    if mode ~= "half" then key = n end
  end
  n = n + 1
  local body = '{"id":"' .. prefix .. '-' .. tid .. '-' .. key ..
      '","type":"created","data":{"amount":1234,"currency":"EUR","customer":"c-' .. (key % 1000) .. '"}}'
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status == 202 then s202 = s202 + 1
  elseif status == 200 then s200 = s200 + 1
  else other = other + 1 end
end

function done(summary, latency, requests)
  local a, b, o = 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("s202")
    b = b + t:get("s200")
    o = o + t:get("other")
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write +
      summary.errors.status + summary.errors.timeout
  io.write(string.format("rps=%.0f p50_us=%d p99_us=%d requests=%d s202=%d s200=%d other=%d errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    summary.requests, a, b, o, errors))
end
