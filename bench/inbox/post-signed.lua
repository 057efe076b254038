-- wrk script of the verification cost (run-ingest.sh targets queuebox-sig and queuebox-verify):
-- POSTs pre-signed Standard Webhooks requests read from a file (presign.py), each line once, the
-- threads taking every THREADS-th line. Both targets send the same bytes; only the source's auth
-- differs. done() prints the line of post.lua, plus wrapped= (requests past the end of the file,
-- which would repeat a key: keep it 0).
--   wrk ... -s post-signed.lua URL -- FILE THREADS

local threads = {}
local counter = 1

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  lines = {}
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == tid - 1 then
      local id, ts, sig, body = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
      table.insert(lines, { id, ts, sig, body })
    end
    i = i + 1
  end
  n = 0
  wrapped = 0
  s202, s200, other = 0, 0, 0
end

function request()
  local line = lines[(n % #lines) + 1]
  if n >= #lines then wrapped = wrapped + 1 end
  n = n + 1
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["webhook-id"] = line[1],
    ["webhook-timestamp"] = line[2],
    ["webhook-signature"] = line[3],
  }, line[4])
end

function response(status, headers, body)
  if status == 202 then s202 = s202 + 1
  elseif status == 200 then s200 = s200 + 1
  else other = other + 1 end
end

function done(summary, latency, requests)
  local a, b, o, w = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("s202")
    b = b + t:get("s200")
    o = o + t:get("other")
    w = w + t:get("wrapped")
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write +
      summary.errors.status + summary.errors.timeout
  io.write(string.format("rps=%.0f p50_us=%d p99_us=%d requests=%d s202=%d s200=%d other=%d errors=%d wrapped=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    summary.requests, a, b, o, errors, w))
end
