-- get.lua: one GET of the URL's path per request, keep-alive (wrk's default
-- request). Used by: hello GET /, todo GET /todos.
done = require("report").done
