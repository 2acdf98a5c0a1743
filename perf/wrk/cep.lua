-- cep.lua: GET /api/v1/cep/{cep}, cycling over the CEPs of a file (8 digits,
-- one a line; the cep scenario writes a fixed shuffle of its benchmark set):
--   wrk ... -s cep.lua http://127.0.0.1:P/api/v1/cep/ -- FILE[:COUNT]
-- With COUNT (cep_count.lua), the run stops itself after COUNT responses
-- (a few more already read may be counted: 20,005 for 20,000): the thread's
-- loop is stopped and wrk is sent SIGINT (its handler ends the main
-- thread's sleep, as Ctrl-C does); the duration reported is the time from
-- the connections' start to the COUNT-th response, measured here. Responses
-- in flight on the other connections are dropped. -d is only a cap then
-- (the "-- perf-duration:" line of cep_count.lua).
local ceps = {}
local i = 0
local limit, seen, stopped = nil, 0, false

init = function(args)
  local spec = args[1] or "ceps.txt"
  local file, count = spec:match("^(.*):(%d+)$")
  if file then spec, limit = file, tonumber(count) end
  local f = assert(io.open(spec, "r"), "cep.lua: CEP file " .. spec)
  for line in f:lines() do
    if line:match("^%d%d%d%d%d%d%d%d$") then ceps[#ceps + 1] = line end
  end
  f:close()
  assert(#ceps > 0, "cep.lua: no CEPs")
end

request = function()
  i = i % #ceps + 1
  return wrk.format("GET", "/api/v1/cep/" .. ceps[i])
end

if CEP_COUNTED then
  local function now_ns()
    local f = io.popen("date +%s%N")
    local v = tonumber(f:read("*l"))
    f:close()
    return v
  end
  local threads, t0 = {}, nil

  setup = function(thread)
    threads[#threads + 1] = thread
  end

  local base_init = init
  init = function(args)
    base_init(args)
    t0 = now_ns() -- the connections open right after init
  end

  response = function(status, headers, body)
    seen = seen + 1
    if limit and seen >= limit and not stopped then
      stopped = true
      -- The time taken, first request to COUNT-th response, for done().
      wrk.thread:set("elapsed_us", math.floor((now_ns() - t0) / 1000))
      wrk.thread:stop()
      -- io.popen, not os.execute: system() ignores SIGINT in wrk while it
      -- waits. Twice: if the first lands on this thread rather than on
      -- wrk's sleeping main thread, the run would last until -d.
      io.popen("kill -INT $PPID; sleep 0.05; kill -INT $PPID 2>/dev/null"):close()
    end
  end

  -- wrk's duration is from its start to the threads' end (its main thread
  -- sleeps until SIGINT or -d): report the time measured above instead.
  done = function(summary, latency, requests)
    local us = threads[1] and tonumber(threads[1]:get("elapsed_us"))
    if us and us > 0 then summary.duration = us end
    require("report").done(summary, latency, requests)
  end
else
  done = require("report").done
end
