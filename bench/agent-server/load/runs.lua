-- wrk script: every request is a run on a new thread of the `seed` graph, waited for
-- (POST /threads/{id}/runs/wait with if_not_exists = create), so each one creates a thread,
-- runs two nodes and checkpoints them. Thread ids are UUIDs made of the wrk thread's number
-- and a counter, unique within one wrk invocation; STATEGRAPH_LOAD_PREFIX (8 hex digits)
-- keeps invocations apart.
local counter = 0
local threads = {}
local prefix = os.getenv("STATEGRAPH_LOAD_PREFIX") or "00000000"

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = '{"assistant_id":"seed","input":{},"if_not_exists":"create"}'
end

function request()
  counter = counter + 1
  local id = string.format("%s-%04x-4000-8000-%012x", prefix, tid, counter)
  return wrk.format(nil, "/threads/" .. id .. "/runs/wait")
end

local bad = 0
function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format(
    "RESULT runs_per_s=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f requests=%d non200=%d errors=%d\n",
    summary.requests / s,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    summary.requests,
    summary.errors.status, summary.errors.connect + summary.errors.read
      + summary.errors.write + summary.errors.timeout))
end
