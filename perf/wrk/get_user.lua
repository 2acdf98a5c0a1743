-- get_user.lua: GET /users/{id} with a random id in 1..N (the users scenario
-- seeds ids 1..10000; N is the script argument, default 10000):
--   wrk ... -s get_user.lua http://127.0.0.1:P/users/ -- 10000
-- Seeded per run from /dev/urandom: every request names an existing user.
local n = 10000

init = function(args)
  n = tonumber(args[1]) or n
  local f = io.open("/dev/urandom", "rb")
  local b = f and f:read(4) or "seed"
  if f then f:close() end
  math.randomseed(b:byte(1) * 16777216 + b:byte(2) * 65536 + b:byte(3) * 256 + b:byte(4))
end

request = function()
  return wrk.format("GET", "/users/" .. math.random(n))
end

done = require("report").done
