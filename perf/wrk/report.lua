-- report.lua: the done() hook shared by every perf/wrk script.
--
-- wrk calls done(summary, latency, requests) once, after the run. This prints
-- one line, "WRK_JSON {...}", that perf/lib/report.py reads: requests
-- completed (responses parsed; with pipelining one request string yields
-- several), duration, bytes, socket errors, responses with status > 399
-- (wrk's "Non-2xx or 3xx" counter) and latency percentiles in microseconds.
-- With pipelining wrk times a whole batch: the latency is per batch.
--
-- Use from a script:   done = require("report").done
-- (perf/lib/wrk.sh puts perf/wrk on LUA_PATH.)

local M = {}

local percentiles = {
  { "p50", 50 }, { "p75", 75 }, { "p90", 90 },
  { "p99", 99 }, { "p99_9", 99.9 }, { "p99_99", 99.99 },
}

function M.done(summary, latency, requests)
  local e = summary.errors
  local parts = {
    string.format('"requests":%d', summary.requests),
    string.format('"duration_us":%d', summary.duration),
    string.format('"bytes":%d', summary.bytes),
    string.format('"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}',
      e.connect, e.read, e.write, e.status, e.timeout),
  }
  local lat = {
    string.format('"min":%d', latency.min),
    string.format('"max":%d', latency.max),
    string.format('"mean":%.1f', latency.mean),
    string.format('"stdev":%.1f', latency.stdev),
  }
  for _, p in ipairs(percentiles) do
    lat[#lat + 1] = string.format('"%s":%d', p[1], latency:percentile(p[2]))
  end
  parts[#parts + 1] = '"latency_us":{' .. table.concat(lat, ",") .. '}'
  io.write("WRK_JSON {" .. table.concat(parts, ",") .. "}\n")
end

return M
