-- cep_count.lua: cep.lua bounded by a count of requests instead of time:
--   wrk ... -s cep_count.lua http://127.0.0.1:P/api/v1/cep/ -- FILE:COUNT
-- (one wrk thread). perf/lib/wrk.sh reads the next line: -d is a cap.
-- perf-duration: 300
CEP_COUNTED = true
require("cep")
