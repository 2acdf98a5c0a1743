#!/usr/bin/python3
"""tests/perf/check_report.py RESULTS_DIR SCENARIO...: check that a perf/run
results directory holds a report with figures (never a speed): results.json
and REPORT.md exist; every scenario has cases; coring ran in each; every
server that ran has req/s, latency percentiles, CPU per request, peak
memory, cold start and size; a peer that was not run says why in the
report; charts were drawn when matplotlib is installed.
"""

import importlib.util
import json
import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, scenarios = sys.argv[1], sys.argv[2:]
    errors = []

    def need(cond, msg):
        if not cond:
            errors.append(msg)

    report_path = os.path.join(out, "REPORT.md")
    need(os.path.isfile(report_path), "no REPORT.md")
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        doc = json.load(f)
    report = open(report_path, encoding="utf-8").read() if os.path.isfile(report_path) else ""
    for key in ("cpu_model", "kernel", "nproc"):
        need(doc["machine"].get(key), f"machine.{key} missing")
    need(doc["commands"].get("perf_run"), "the perf/run command is not recorded")
    rows = 0
    for sc in scenarios:
        cases = [c for c in doc["cases"] if c["scenario"] == sc]
        need(cases, f"{sc}: no case in results.json")
        for c in cases:
            where = f"{sc}/{c['case']} ({c['cpus']} core(s))"
            need(f"### {sc} / {c['case']}, {c['cpus']} core" in report, f"{where}: no section in REPORT.md")
            names = [s["server"] for s in c["servers"]]
            need("coring" in names, f"{where}: coring did not run")
            for s in c["servers"]:
                w = f"{where} {s['server']}"
                if s["status"] != "ok":
                    errors.append(f"{w}: {s['status']}: {s.get('reason')}")
                    continue
                m = s.get("summary") or {}
                need((m.get("rps") or 0) > 0, f"{w}: no req/s")
                for p in ("p50", "p90", "p99"):
                    need(m.get("latency_us", {}).get(p), f"{w}: no {p}")
                need(m.get("server_cpu_us_per_request") is not None, f"{w}: no CPU per request")
                need(s.get("cgroup_peak_kb") or s.get("peak_rss_kb"), f"{w}: no peak memory")
                need(s.get("idle_rss_kb"), f"{w}: no idle RSS")
                need(s.get("cold_start_ms") is not None, f"{w}: no cold start")
                need(s.get("size_bytes"), f"{w}: no size")
                need(f"| {s['server']} | " in report, f"{w}: no row in REPORT.md")
                if any(x["server"] == "floor" and x["status"] == "ok" for x in c["servers"]):
                    need(s.get("cpu_per_request_vs_floor") is not None, f"{w}: no CPU/req ratio to floor")
                rows += 1
            for p in c.get("not_run", {}):
                need(f"| {p} | not run: " in report, f"{where}: {p} not run but not said in REPORT.md")
    if importlib.util.find_spec("matplotlib"):
        for sc in scenarios:
            for chart in doc.get("charts", {}).get(sc, []):
                need(os.path.getsize(os.path.join(out, chart)) > 0, f"empty chart {chart}")
            need(doc.get("charts", {}).get(sc), f"{sc}: no chart drawn")
    if errors:
        print("FAIL\n" + "\n".join(errors))
        sys.exit(1)
    print(f"ok: {rows} rows with figures in {out}/REPORT.md")


if __name__ == "__main__":
    main()
