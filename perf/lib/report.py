#!/usr/bin/python3
"""perf/lib/report.py: turn a results directory's raw/ tree into results.json
and REPORT.md, and print the tables. Standard library only.

  report.py finalize RESULTS_DIR      write results.json + REPORT.md + charts/, print the tables
  report.py run-line RUN_DIR CLK_TCK  one run's figures on one line (progress log)
  report.py cold-line FILE.json       one cold start's figures on one line (progress log)

perf/run writes raw/ as it goes (key=value text files, one value per line):

  raw/meta.txt                              machine, versions, settings, commands
  raw/cases.txt                             "<scenario>/<case>" per line, in run order
  raw/<scenario>/<case>/case.txt            what the case measures (<case> = <name>-<N>cpu)
  raw/<scenario>/<case>/<server>/server.txt status, commands, layout, peak memory, checks
  raw/<scenario>/coldstart-<N>cpu/<server>.json  cold start (launches, median) and idle RSS
  raw/<scenario>/<case>/<server>/run<i>/wrk.txt      wrk's stdout (WRK_JSON line)
  raw/<scenario>/<case>/<server>/run<i>/metrics.txt  CPU ticks, wall time, wrk CPU

A run's figures: req/s = responses / wrk's duration; latency percentiles
from wrk's histogram; server CPU us/request = (utime+stime ticks of the
server's process tree during the run) / CLK_TCK / responses; server CPU % =
that CPU time / wall time of the run; wrk CPU % likewise for the client. A
case's figure is the median over its runs; req/s of every run is shown too.
Charts (perf/lib/charts.py, matplotlib) are drawn when matplotlib imports.
"""

import json
import os
import re
import statistics
import sys

SUBJECT = "coring"
FLOOR = "floor"       # perf/peers/floor: every server's CPU per request is also shown as a ratio to it
INT8 = "-int8"        # an int8 server's name ends so; its ratios are against coring-int8's
CLIENT_BOUND = 0.90   # wrk CPU at or above this: req/s is the client's limit


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
        "rps_runs": rps,
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
            "cpu_per_request_vs_floor": "the server's median CPU us/request divided by the floor peer's "
                                        "(perf/peers/floor) in the same case",
        },
        "cases": [],
    }
    doc["not_run"] = {k[len("notrun."):]: meta[k] for k in meta if k.startswith("notrun.")}
    doc["sizes"] = {}
    for k in meta:
        if k.startswith("size."):
            b, _, what = meta[k].partition(" ")
            doc["sizes"][k[len("size."):]] = {"bytes": num(b, int), "what": what}
    doc["method"]["peak_memory"] = (meta.get("setting.memory_peak") or "") + \
        " of a cgroup holding only the server's processes, read after the case's last run (VmHWM is recorded too)"
    doc["method"]["cold_start"] = ("launch (exec of the pinned command) to the first 200 of the scenario's probe "
                                   "path, polled every 2 ms; median of the launches; idle RSS = VmRSS summed over "
                                   "the process tree 0.5 s after the last launch's first 200")
    doc["coldstart"] = {}
    for sc in sorted(os.listdir(raw)) if os.path.isdir(raw) else []:
        sdir = os.path.join(raw, sc)
        if not os.path.isdir(sdir):
            continue
        for d in sorted(os.listdir(sdir)):
            m = re.fullmatch(r"coldstart-(\d+)cpu", d)
            if not m:
                continue
            for f in sorted(os.listdir(os.path.join(sdir, d))):
                if not f.endswith(".json"):
                    continue
                try:
                    cs = json.load(open(os.path.join(sdir, d, f)))
                except (OSError, ValueError):
                    continue
                cs["command"] = read_kv(os.path.join(sdir, d, f[:-5] + ".txt")).get("command")
                doc["coldstart"].setdefault(sc, {}).setdefault(m.group(1), {})[f[:-5]] = cs
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
            "cpus": num(c.get("cpus"), int) or 1,
            "server_cpus": c.get("server_cpus"),
            "client_cpu": c.get("client_cpu"),
            "shared_with_client": c.get("shared_with_client") == "1",
            "not_run": {p: doc["not_run"].get(p, "not run") for p in c.get("not_run", "").split()},
            "wrk_script": c.get("wrk_script"),
            "notes": c.get("notes") or None,
            # A reference the scenario measured beside the servers (users:
            # pgbench on the same query): name, rps, command, note.
            "reference": read_kv(os.path.join(case_dir, "reference.txt")) or None,
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
                "layout": s.get("layout") or None,
                "peak_rss_kb": num(s.get("peak_rss_kb"), int),
                "cgroup_peak_kb": num(s.get("cgroup_peak_kb"), int),
                "processes": num(s.get("processes"), int),
                "runs": [],
            }
            i = 1
            while os.path.isdir(os.path.join(sdir, f"run{i}")):
                entry["runs"].append(load_run(os.path.join(sdir, f"run{i}"), clk_tck))
                i += 1
            entry["summary"] = summarise(entry["runs"])
            cs = doc["coldstart"].get(case["scenario"], {}).get(str(case["cpus"]), {}).get(server, {})
            entry["cold_start_ms"] = cs.get("median_ms")
            # Idle memory the way peak memory is measured: the cgroup where there is one.
            entry["idle_rss_kb"] = cs.get("idle_cgroup_kb") or cs.get("idle_rss_kb")
            entry["idle_vmrss_kb"] = cs.get("idle_rss_kb")
            entry["size_bytes"] = doc["sizes"].get(server, {}).get("bytes")
            if entry["status"] == "ok" and not all(r["ok"] for r in entry["runs"]):
                entry["status"] = "failed"
                entry["reason"] = entry["reason"] or "server exited during a run"
            case["servers"].append(entry)
        floor = floor_cpu(case)
        for entry in case["servers"]:
            m = entry["summary"]
            entry["cpu_per_request_vs_floor"] = (
                round(m["server_cpu_us_per_request"] / floor, 3)
                if floor and m and m["server_cpu_us_per_request"] is not None else None)
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


HEADER = ["server", "req/s (median)", "req/s per run", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms",
          "non-2xx", "socket err", "CPU µs/req", "CPU/req ÷ floor", "server CPU", "wrk CPU", "peak MiB", "idle MiB",
          "cold start ms", "size MiB", "coring÷it req/s", "coring÷it CPU/req"]


def peak_kb(s):
    return s.get("cgroup_peak_kb") or s.get("peak_rss_kb")


def mib(kb):
    return "—" if kb is None else f"{kb / 1024:.1f}"


def floor_cpu(case):
    """The floor peer's median CPU µs per request in @case, or None (not run, failed)."""
    return next((s["summary"]["server_cpu_us_per_request"] for s in case["servers"]
                 if s["server"] == FLOOR and s["status"] == "ok" and s["summary"]), None)


def case_table(case):
    rows = [HEADER, ["---"] + ["---:"] * (len(HEADER) - 1)]
    subject = next((s["summary"] for s in case["servers"]
                    if s["server"] == SUBJECT and s["status"] == "ok"), None)
    floor = floor_cpu(case)
    # Two groups where int8 servers run (the embed cases): a server whose
    # name ends in -int8 is compared with coring-int8, the others with
    # coring, float32 with float32 and int8 with int8; the int8 rows last.
    int8_subject = next((s["summary"] for s in case["servers"]
                         if s["server"] == SUBJECT + INT8 and s["status"] == "ok"), None)
    float_subject = subject
    for s in sorted(case["servers"], key=lambda s: s["server"].endswith(INT8)):
        m = s["summary"]
        subject = int8_subject if s["server"].split("@")[0].endswith(INT8) else float_subject
        if s["status"] != "ok" or m is None:
            reason = (s.get("reason") or s["status"]).replace("|", "/")
            rows.append([s["server"], f"{s['status']}: {reason}"] + [""] * (len(HEADER) - 2))
            continue
        bound = m["client_cpu_util"] is not None and m["client_cpu_util"] >= CLIENT_BOUND
        rps = fmt_int(m["rps"]) + (" ‡" if bound else "")
        per_run = " / ".join(fmt_int(v) for v in m.get("rps_runs", []))
        lat = m["latency_us"]
        is_subject = s["server"] in (SUBJECT, SUBJECT + INT8)
        rows.append([
            s["server"], rps, per_run,
            fmt_ms(lat.get("p50")), fmt_ms(lat.get("p90")), fmt_ms(lat.get("p99")),
            fmt_ms(lat.get("p99_9")),
            fmt_int(m["errors_status_ge_400"]), fmt_int(m["errors_socket"]),
            "—" if m["server_cpu_us_per_request"] is None else f"{m['server_cpu_us_per_request']:.2f}",
            fmt_ratio(m["server_cpu_us_per_request"], floor),
            fmt_pct(m["server_cpu_util"]), fmt_pct(m["client_cpu_util"]) + (" ‡" if bound else ""),
            mib(peak_kb(s)), mib(s.get("idle_rss_kb")),
            "—" if s.get("cold_start_ms") is None else f"{s['cold_start_ms']:.1f}",
            "—" if s.get("size_bytes") is None else f"{s['size_bytes'] / 1048576:.1f}",
            "—" if is_subject or subject is None else fmt_ratio(subject["rps"], m["rps"]),
            "—" if is_subject or subject is None else fmt_ratio(subject["server_cpu_us_per_request"],
                                                              m["server_cpu_us_per_request"]),
        ])
    for p, reason in case.get("not_run", {}).items():
        rows.append([p, "not run: " + reason.replace("|", "/")] + [""] * (len(HEADER) - 2))
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


# Variants of coring measured as servers of their own (perf/peers/coring-*):
# the same binary, one flag apart. Each gets a ratio line of its own.
VARIANTS = ("coring-nocache", "coring-int8")


def variant_text(case):
    """One line per coring variant in @case: its req/s over every other server's."""
    ok = {s["server"]: s["summary"] for s in case["servers"]
          if s["status"] == "ok" and s["summary"] and s["summary"].get("rps")}
    lines = []
    for v in VARIANTS:
        if v not in ok:
            continue
        parts = [f"{name} {fmt_ratio(ok[v]['rps'], m['rps'])}" for name, m in ok.items() if name != v]
        if parts:
            lines.append(f"{v}÷it req/s: " + ", ".join(parts) + ".")
    return " ".join(lines)


def reference_text(case):
    """One line: the case's reference figure and coring's req/s as a fraction of it."""
    ref = dict(case.get("reference") or {})
    # Runs before the note existed named pgbench "PostgreSQL ceiling".
    if ref.get("name", "").startswith("PostgreSQL ceiling, "):
        ref["name"] = ref["name"][len("PostgreSQL ceiling, "):]
        ref.setdefault("note", "pgbench is one client thread on wrk's CPU, measured as a server "
                       "is: a peer, not PostgreSQL's ceiling")
    rps = num(ref.get("rps"))
    if not rps:
        if ref and ref.get("failed"):
            return f"Reference: {ref.get('name', '?')}: not measured: {ref['failed']}."
        return ""
    subject = next((s["summary"] for s in case["servers"]
                    if s["server"] == SUBJECT and s["status"] == "ok" and s["summary"]), None)
    t = f"Reference: {ref.get('name', '?')}: {rps:,.0f}/s"
    if subject and subject.get("rps"):
        t += f"; coring's req/s is {subject['rps'] / rps:.2f} of it"
    if ref.get("command"):
        t += f" (`{ref['command']}`)"
    if ref.get("note"):
        t += f". {ref['note']}"
    return t + "."


def shape_text(case):
    t = f"server on {case['cpus']} core{'s' if case['cpus'] > 1 else ''} (CPU {case.get('server_cpus')}), " \
        f"wrk on CPU {case.get('client_cpu')}"
    if case.get("shared_with_client"):
        t += " — **the server shares wrk's core** (this machine has too few CPUs to keep them apart)"
    return t


def layouts(case):
    parts = [f"{s['server']}: {s['layout']}" for s in case["servers"] if s.get("layout")]
    return "Processes: " + "; ".join(parts) + "." if parts else ""


def markdown(doc, charts):
    st, mc, vs = doc["settings"], doc["machine"], doc["versions"]
    shapes = str(st.get("shapes", "1")).split()
    shape_desc = "; ".join(
        f"{n} core{'s' if n != '1' else ''}: server on CPU {st.get('server_cpus.' + n, '?')}"
        + (" (shared with wrk)" if str(st.get("shared_with_client." + n)) == "1" else "")
        for n in shapes)
    out = [
        f"# coring benchmark — {(doc.get('started_at') or '')[:10]} on {mc.get('hostname', '?')}",
        "",
        f"- Machine: {mc.get('cpu_model', '?')}, {mc.get('nproc', '?')} CPUs ({mc.get('cpus_available', '?')} "
        f"usable here), kernel {mc.get('kernel', '?')}, {mc.get('os', '?')}, {mc.get('memory', '?')}",
        "- Versions: " + "; ".join(f"{k}: {v}" for k, v in vs.items()),
        f"- Mode: {st.get('mode', '?')}; {st.get('runs', '?')} run(s) of {st.get('duration_s', '?')} s per "
        f"case and server, after {st.get('warmup_s', '?')} s of warm-up; cold start = median of "
        f"{st.get('coldstart_launches', '?')} launches.",
        f"- Shapes: {shape_desc}; wrk (1 thread) on CPU {st.get('client_cpu', '?')}; everything on 127.0.0.1.",
        f"- Peak memory: {st.get('memory_peak', 'VmHWM')}.",
        f"- Command: `{doc['commands'].get('perf_run')}`; started {doc.get('started_at')}, "
        f"finished {doc.get('finished_at')}.",
        "",
        "How to read: figures are medians over runs, and every run's req/s is shown (one run lies). "
        "**‡** = wrk's core was saturated (wrk CPU ≥ 90%): that req/s is the load generator's limit, not "
        "the server's — compare CPU µs/req instead. CPU µs/req = the server's user+system CPU time during "
        "the run ÷ responses; server/wrk CPU = CPU time ÷ wall time (100% = one core). non-2xx is wrk's "
        "count of status > 399; socket err = connect + read + write + timeout. peak MiB = the case's memory "
        "high-water mark (warm-up included); idle MiB = RSS after the first response; cold start = launch "
        "to first 200; size = what the server runs from disk (see results.json for what each counts). "
        "coring÷it: above 1 on req/s and below 1 on CPU/req favour coring; an int8 server (name ending "
        "-int8, listed last) is compared with coring-int8, float32 with float32 and int8 with int8. "
        "CPU/req ÷ floor: the server's CPU µs/req "
        "divided by the floor peer's in the same case (a minimal epoll server that parses nothing: the kernel's "
        "loopback TCP cost per request); below 1 is under that floor. Latency percentiles are wrk 4's, "
        "corrected for coordinated omission: they rank servers under the same client but are not raw "
        "per-request latencies; — = none. See perf/README.md for the method and its caveats.",
        "",
    ]
    if doc.get("not_run"):
        out.append("Not run here: " + "; ".join(f"**{p}** ({r})" for p, r in doc["not_run"].items()) + ".")
        out.append("")
    by_scenario = {}
    for case in doc["cases"]:
        by_scenario.setdefault(case["scenario"], []).append(case)
    for scenario, cases in by_scenario.items():
        out.append(f"## {scenario}")
        out.append("")
        for chart in charts.get(scenario, []):
            out.append(f"![{scenario}: {os.path.basename(chart)}]({chart})")
            out.append("")
        for case in cases:
            out.append(f"### {scenario} / {case['case']}, {case['cpus']} core{'s' if case['cpus'] > 1 else ''}: "
                       f"{case['description']}")
            out.append("")
            out.append(f"`{case['method']} {case['path']}`, {case['connections']} connections, "
                       f"wrk script `perf/wrk/{case['wrk_script']}`; {shape_text(case)}.")
            if case.get("notes"):
                out.append(case["notes"])
            lay = layouts(case)
            if lay:
                out.append(lay)
            out.append("")
            out.append(case_table(case))
            out.append("")
            if variant_text(case):
                out.append(variant_text(case))
                out.append("")
            if reference_text(case):
                out.append(reference_text(case))
                out.append("")
    if charts.get("_error"):
        out.append(f"Charts: not drawn ({charts['_error']}).")
        out.append("")
    return "\n".join(out)


def console(doc):
    out = []
    for case in doc["cases"]:
        out.append(f"\n== {case['scenario']}/{case['case']} ({case['cpus']} core(s)): {case['description']}")
        out.append(case_table(case))
        if variant_text(case):
            out.append(variant_text(case))
        if reference_text(case):
            out.append(reference_text(case))
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
    if len(sys.argv) == 3 and sys.argv[1] == "cold-line":
        try:
            d = json.load(open(sys.argv[2]))
        except (OSError, ValueError) as e:
            print(f"no result ({e})")
            return
        print(d.get("error") or f"{d.get('median_ms')} ms (launches {d.get('launches_ms')}), "
                                  f"idle RSS {mib(d.get('idle_rss_kb'))} MiB")
        return
    if len(sys.argv) != 3 or sys.argv[1] != "finalize":
        sys.exit(__doc__)
    results_dir = sys.argv[2]
    doc = build(results_dir)
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import charts as charts_mod
        charts = charts_mod.draw(doc, results_dir)
    except ImportError as e:
        charts = {"_error": f"{e}; install python3-matplotlib"}
    except Exception as e:  # a chart must never lose the figures
        charts = {"_error": f"{type(e).__name__}: {e}"}
    doc["charts"] = charts
    with open(os.path.join(results_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(results_dir, "REPORT.md"), "w", encoding="utf-8") as f:
        f.write(markdown(doc, charts) + "\n")
    print(console(doc))


if __name__ == "__main__":
    main()
