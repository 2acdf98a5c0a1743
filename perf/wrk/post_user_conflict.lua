-- post_user_conflict.lua: POST /users where one request in N (the first
-- script argument, default 8) asks for an email that is already taken
-- ("conflict-<run tag>@example.com": the first of them creates it, every
-- later one answers 409), the others a new one as post_user.lua does.
-- For measuring what conflicts cost with and without coalescing
-- (perf/db_cost.sh --case post-conflict; docs/database.md).
local tag, count, every = "", 0, 8

init = function(args)
  every = tonumber(args[1]) or 8
  local f = assert(io.open("/dev/urandom", "rb"), "post_user_conflict.lua: /dev/urandom")
  tag = f:read(6):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  f:close()
end

request = function()
  count = count + 1
  local email
  if count % every == 0 then
    email = string.format("conflict-%s@example.com", tag)
  else
    email = string.format("bench-%s-%d@example.com", tag, count)
  end
  local body = string.format('{"name":"Bench User %d","email":"%s"}', count, email)
  return wrk.format("POST", "/users", { ["Content-Type"] = "application/json" }, body)
end

done = require("report").done
