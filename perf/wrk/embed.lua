-- embed.lua: POST /embed rotating over a pool of request bodies, the same for
-- every server. The script's argument is a file with one JSON body a line
-- ({"text": "..."}; perf/lib/embed.py pool writes it); each wrk thread
-- builds every request once, then cycles through them in order.
local requests, n, i = {}, 0, 0

function init(args)
  local path = assert(args[1], "embed.lua: needs the pool file as its argument")
  local f = assert(io.open(path, "r"))
  for line in f:lines() do
    if line ~= "" then
      requests[#requests + 1] = wrk.format("POST", nil,
        { ["Content-Type"] = "application/json" }, line)
    end
  end
  f:close()
  n = #requests
  assert(n > 0, "embed.lua: empty pool " .. path)
end

function request()
  i = i % n + 1
  return requests[i]
end

done = require("report").done
