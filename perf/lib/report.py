#!/usr/bin/python3
"""perf/lib/report.py: turn a results directory's raw/ tree into results.json
and REPORT.md, and print the tables. Standard library only.

  report.py finalize RESULTS_DIR      write results.json + REPORT.md, print the tables
  report.py run-line RUN_DIR CLK_TCK  one run's figures on one line (progress log)

perf/run writes raw/ as it goes (key=value text files, one value per line):

  raw/meta.txt                              machine, versions, settings, commands
  raw/cases.txt                             "<scenario>/<case>" per line, in run order
  raw/<scenario>/<case>/case.txt            what the case measures
  raw/<scenario>/<case>/<server>/server.txt status, commands, peak RSS, checks
  raw/<scenario>/<case>/<server>/run<i>/wrk.txt      wrk's stdout (WRK_JSON line)
  raw/<scenario>/<case>/<server>/run<i>/metrics.txt  CPU ticks, wall time, wrk CPU

A run's figures: req/s = responses / wrk's duration; latency percentiles
from wrk's histogram; server CPU us/request = (utime+stime ticks of the
server's process tree during the run) / CLK_TCK / responses; server CPU % =
that CPU time / wall time of the run; wrk CPU % likewise for the client. A
case's figure is the median over its runs.
"""

import json
import os
import re
import statistics
import sys

SUBJECT = "coring"


def read_kv(path):
    out = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, _, v = line.partition("=")
                out[k] = v
    return out


def num(v, kind=float):
    try:
        return kind(v)
    except (TypeError, ValueError):
        return None


def parse_wrk(path):
    """wrk's stdout -> dict. Prefers the WRK_JSON line from perf/wrk/report.lua,
    falls back to the text of --latency."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("WRK_JSON "):
            return json.loads(line[len("WRK_JSON "):])
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", text)
    if not m:
        return None
    unit = {"us": 1, "ms": 1e3, "s": 1e6, "m": 6e7}[m.group(3)]
    res = {"requests": int(m.group(1)), "duration_us": float(m.group(2)) * unit,
           "errors": {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0},
           "latency_us": {}}
    scale = {"us": 1, "ms": 1e3, "s": 1e6}
    for p, v, u in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M):
        res["latency_us"]["p" + p] = float(v) * scale[u]
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        for k, v in zip(("connect", "read", "write", "timeout"), m.groups()):
            res["errors"][k] = int(v)
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        res["errors"]["status"] = int(m.group(1))
    return res


def load_run(run_dir, clk_tck):
    wrk = parse_wrk(os.path.join(run_dir, "wrk.txt"))
    met = read_kv(os.path.join(run_dir, "metrics.txt"))
    if wrk is None:
        return {"ok": False, "error": "no wrk output", "metrics": met}
    # wrk 4 "corrects" latency for coordinated omission by adding samples
    # below the slow ones; some can land under its recorded minimum, which its
    # percentile walk skips, and a high percentile then comes back as 0 (seen
    # with pipelining). 0 is never a real latency here: record it as unknown.
    wrk["latency_us"] = {k: (None if k.startswith("p") and not v else v)
                         for k, v in wrk["latency_us"].items()}
    reqs = wrk["requests"]
    dur_s = wrk["duration_us"] / 1e6
    wall_s = (num(met.get("wall_ns")) or 0) / 1e9
    ticks = num(met.get("server_cpu_ticks"), int)
    cpu_s = ticks / clk_tck if ticks is not None else None
    client_cpu_s = num(met.get("client_cpu_s"))
    e = wrk["errors"]
    run = {
        "ok": met.get("server_alive") == "1",
        "wrk_status": num(met.get("wrk_status"), int),
        "requests": reqs,
        "duration_s": round(dur_s, 3),
        "wall_s": round(wall_s, 3),
        "rps": round(reqs / dur_s, 1) if dur_s > 0 else None,
        "bytes": wrk.get("bytes"),
        "latency_us": wrk["latency_us"],
        "errors": {"status_ge_400": e["status"],
                   "socket": e["connect"] + e["read"] + e["write"] + e["timeout"],
                   "connect": e["connect"], "read": e["read"], "write": e["write"],
                   "timeout": e["timeout"]},
        "server_cpu_ticks": ticks,
        "server_cpu_s": cpu_s,
        "server_cpu_us_per_request": round(cpu_s * 1e6 / reqs, 3) if cpu_s is not None and reqs else None,
        "server_cpu_util": round(cpu_s / wall_s, 3) if cpu_s is not None and wall_s else None,
        "client_cpu_s": client_cpu_s,
        "client_cpu_util": round(client_cpu_s / wall_s, 3) if client_cpu_s is not None and wall_s else None,
    }
    if not run["ok"]:
        run["error"] = "server exited during the run"
    return run


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(runs):
    good = [r for r in runs if r.get("requests")]
    if not good:
        return None
    pct = sorted({k for r in good for k in r["latency_us"] if k.startswith("p")},
                 key=lambda k: float(k[1:].replace("_", ".")))
    rps = [r["rps"] for r in good]
    return {
        "runs": len(good),
        "rps": median(rps),
        "rps_min": min(rps),
        "rps_max": max(rps),
        "latency_us": {k: median([r["latency_us"].get(k) for r in good]) for k in pct},
        "errors_status_ge_400": sum(r["errors"]["status_ge_400"] for r in good),
        "errors_socket": sum(r["errors"]["socket"] for r in good),
        "requests": sum(r["requests"] for r in good),
        "server_cpu_us_per_request": median([r["server_cpu_us_per_request"] for r in good]),
        "server_cpu_util": median([r["server_cpu_util"] for r in good]),
        "client_cpu_util": median([r["client_cpu_util"] for r in good]),
    }


def typed(d):
    """Numbers out of a key=value dict's strings."""
    out = {}
    for k, v in d.items():
        out[k] = int(v) if re.fullmatch(r"-?[0-9]+", v or "") else v
    return out


def build(results_dir):
    raw = os.path.join(results_dir, "raw")
    meta = read_kv(os.path.join(raw, "meta.txt"))
    clk_tck = int(meta.get("machine.clk_tck", "100"))
    doc = {
        "schema": 1,
        "started_at": meta.get("started_at"),
        "finished_at": meta.get("finished_at"),
        "settings": typed({k[len("setting."):]: meta[k] for k in meta if k.startswith("setting.")}),
        "machine": typed({k[len("machine."):]: meta[k] for k in meta if k.startswith("machine.")}),
        "versions": {k[len("version."):]: meta[k] for k in meta if k.startswith("version.")},
        "commands": {
            "perf_run": meta.get("command.perf_run"),
            "build": [meta[k] for k in sorted(meta) if k.startswith("command.build.")],
            "peer_setup": [meta[k] for k in sorted(meta) if k.startswith("command.setup.")],
        },
        "method": {
            "server_cpu_us_per_request": "(utime+stime of the server's process tree, /proc/PID/stat fields 14+15, "
                                         "delta over the measured run) / CLK_TCK / responses wrk completed",
            "peak_rss_kb": "VmHWM from /proc/PID/status summed over the server's processes, read after the case's last run",
            "errors_status_ge_400": "wrk's 'Non-2xx or 3xx' counter, which counts responses with status > 399",
            "aggregate": "per-figure median over the case's runs",
        },
        "cases": [],
    }
    order_path = os.path.join(raw, "cases.txt")
    order = [line.strip() for line in open(order_path)] if os.path.exists(order_path) else []
    for key in order:
        if not key:
            continue
        case_dir = os.path.join(raw, key)
        c = read_kv(os.path.join(case_dir, "case.txt"))
        case = {
            "scenario": c.get("scenario"),
            "case": c.get("case"),
            "app": c.get("app"),
            "description": c.get("description"),
            "method": c.get("method"),
            "path": c.get("path"),
            "connections": num(c.get("connections"), int),
            "wrk_script": c.get("wrk_script"),
            "notes": c.get("notes") or None,
            "servers": [],
        }
        for server in c.get("servers", "").split():
            sdir = os.path.join(case_dir, server)
            s = read_kv(os.path.join(sdir, "server.txt"))
            entry = {
                "server": server,
                "status": s.get("status", "missing"),
                "reason": s.get("reason") or None,
                "commands": {k[len("command."):]: s[k] for k in s if k.startswith("command.")},
                "checks": [s[k] for k in sorted(s) if k.startswith("check.")],
                "peak_rss_kb": num(s.get("peak_rss_kb"), int),
                "processes": num(s.get("processes"), int),
                "runs": [],
            }
            i = 1
            while os.path.isdir(os.path.join(sdir, f"run{i}")):
                entry["runs"].append(load_run(os.path.join(sdir, f"run{i}"), clk_tck))
                i += 1
            entry["summary"] = summarise(entry["runs"])
            if entry["status"] == "ok" and not all(r["ok"] for r in entry["runs"]):
                entry["status"] = "failed"
                entry["reason"] = entry["reason"] or "server exited during a run"
            case["servers"].append(entry)
        doc["cases"].append(case)
    return doc


def fmt_int(v):
    return "—" if v is None else f"{v:,.0f}"


def fmt_ms(us):
    if us is None:
        return "—"
    ms = us / 1000
    return f"{ms:.3f}" if ms < 1 else (f"{ms:.2f}" if ms < 100 else f"{ms:.0f}")


def fmt_pct(v):
    return "—" if v is None else f"{v * 100:.0f}%"


def fmt_ratio(a, b):
    if a is None or not b:
        return "—"
    return f"{a / b:.2f}×"


HEADER = ["server", "req/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "HTTP ≥400",
          "socket err", "CPU µs/req", "server CPU", "wrk CPU", "peak RSS MiB",
          "coring÷it req/s", "coring÷it CPU/req"]


def case_table(case):
    rows = [HEADER, ["---"] + ["---:"] * (len(HEADER) - 1)]
    subject = next((s["summary"] for s in case["servers"]
                    if s["server"] == SUBJECT and s["status"] == "ok"), None)
    for s in case["servers"]:
        m = s["summary"]
        if s["status"] != "ok" or m is None:
            reason = (s.get("reason") or s["status"]).replace("|", "/")
            rows.append([s["server"], f"{s['status']}: {reason}"] + [""] * (len(HEADER) - 2))
            continue
        rps = fmt_int(m["rps"])
        if m["runs"] > 1 and m["rps"]:
            rps += f" ±{(m['rps_max'] - m['rps_min']) / 2 / m['rps'] * 100:.0f}%"
        lat = m["latency_us"]
        is_subject = s["server"] == SUBJECT
        rows.append([
            s["server"], rps,
            fmt_ms(lat.get("p50")), fmt_ms(lat.get("p90")), fmt_ms(lat.get("p99")),
            fmt_ms(lat.get("p99_9")),
            fmt_int(m["errors_status_ge_400"]), fmt_int(m["errors_socket"]),
            "—" if m["server_cpu_us_per_request"] is None else f"{m['server_cpu_us_per_request']:.2f}",
            fmt_pct(m["server_cpu_util"]), fmt_pct(m["client_cpu_util"]),
            "—" if s["peak_rss_kb"] is None else f"{s['peak_rss_kb'] / 1024:.1f}",
            "—" if is_subject or subject is None else fmt_ratio(subject["rps"], m["rps"]),
            "—" if is_subject or subject is None else fmt_ratio(subject["server_cpu_us_per_request"],
                                                              m["server_cpu_us_per_request"]),
        ])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def markdown(doc):
    st, mc, vs = doc["settings"], doc["machine"], doc["versions"]
    out = [
        f"# coring benchmark — {doc.get('started_at', '')[:10]} on {mc.get('hostname', '?')}",
        "",
        f"- Machine: {mc.get('cpu_model', '?')}, {mc.get('nproc', '?')} CPUs, "
        f"kernel {mc.get('kernel', '?')}, {mc.get('os', '?')}, {mc.get('memory', '?')}",
        "- Versions: " + ", ".join(v if v.lower().startswith(k) else f"{k} {v}" for k, v in vs.items()),
        f"- Mode: {st.get('mode', '?')}; {st.get('runs', '?')} run(s) of {st.get('duration_s', '?')} s per "
        f"case and server after {st.get('warmup_s', '?')} s of warm-up; server pinned to CPU "
        f"{st.get('server_cpu', '?')}, wrk (1 thread) to CPU {st.get('client_cpu', '?')}, all on 127.0.0.1.",
        f"- Command: `{doc['commands'].get('perf_run')}`; started {doc.get('started_at')}, "
        f"finished {doc.get('finished_at')}.",
        "",
        "Figures are medians over runs (± is half the req/s range). CPU µs/req = the server's "
        "user+system CPU time during the run ÷ responses; server/wrk CPU = CPU time ÷ wall time "
        "(100% = one core). HTTP ≥400 is wrk's non-2xx/3xx counter; socket err = connect + read + "
        "write + timeout. coring÷it: above 1 on req/s and below 1 on CPU/req favour coring. "
        "Latency percentiles are wrk 4's, which adds synthetic samples for coordinated omission: "
        "they rank servers under the same client but are not raw per-request latencies; — = wrk gave none. "
        "See perf/README.md for the method and its caveats.",
        "",
    ]
    for case in doc["cases"]:
        out.append(f"## {case['scenario']} / {case['case']}: {case['description']}")
        out.append("")
        out.append(f"`{case['method']} {case['path']}`, {case['connections']} connections, "
                   f"wrk script `perf/wrk/{case['wrk_script']}`.")
        if case.get("notes"):
            out.append(case["notes"])
        out.append("")
        out.append(case_table(case))
        out.append("")
    return "\n".join(out)


def console(doc):
    out = []
    for case in doc["cases"]:
        out.append(f"\n== {case['scenario']}/{case['case']}: {case['description']}")
        out.append(case_table(case))
    return "\n".join(out)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "run-line":
        r = load_run(sys.argv[2], int(sys.argv[3]))
        if not r.get("requests"):
            print(r.get("error", "no result"))
            return
        lat = r["latency_us"]
        cpu = r["server_cpu_us_per_request"]
        print(f"{r['rps']:,.0f} req/s, p50 {fmt_ms(lat.get('p50'))} ms, p99 {fmt_ms(lat.get('p99'))} ms, "
              f"{'—' if cpu is None else f'{cpu:.2f}'} µs CPU/req, server CPU {fmt_pct(r['server_cpu_util'])}, "
              f"wrk CPU {fmt_pct(r['client_cpu_util'])}, errors {r['errors']['status_ge_400']}+{r['errors']['socket']}")
        return
    if len(sys.argv) != 3 or sys.argv[1] != "finalize":
        sys.exit(__doc__)
    results_dir = sys.argv[2]
    doc = build(results_dir)
    with open(os.path.join(results_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(results_dir, "REPORT.md"), "w", encoding="utf-8") as f:
        f.write(markdown(doc) + "\n")
    print(console(doc))


if __name__ == "__main__":
    main()
