"""perf/lib/charts.py: the report's SVG charts, drawn with matplotlib
(Debian's python3-matplotlib). Imported by report.py; draw() returns, per
scenario, the chart paths relative to the results directory.

  charts/<scenario>-throughput.svg          req/s per case and server, one panel per shape
                                            (the error bar spans the runs)
  charts/<scenario>-<N>cpu-latency.svg      latency percentile curves per case, one line per server
"""

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "coring-perf", "font.size": 9})

PCTS = [("p50", 50), ("p75", 75), ("p90", 90), ("p99", 99), ("p99_9", 99.9), ("p99_99", 99.99)]


def _servers(cases):
    order = []
    for c in cases:
        for s in c["servers"]:
            if s["server"] not in order:
                order.append(s["server"])
    return order


def _colors(servers):
    cmap = plt.get_cmap("tab10")
    return {name: cmap(i % 10) for i, name in enumerate(servers)}


def throughput(scenario, cases, path):
    shapes = sorted({c["cpus"] for c in cases})
    servers = _servers(cases)
    color = _colors(servers)
    names = []
    for c in cases:
        if c["case"] not in names:
            names.append(c["case"])
    fig, axes = plt.subplots(len(shapes), 1, figsize=(max(7, 1.1 * len(names) * max(1, len(servers)) / 3), 3.2 * len(shapes)),
                             squeeze=False)
    width = 0.8 / max(1, len(servers))
    for ax, n in zip(axes[:, 0], shapes):
        by_name = {c["case"]: c for c in cases if c["cpus"] == n}
        for k, server in enumerate(servers):
            xs, ys, lo, hi = [], [], [], []
            for i, name in enumerate(names):
                c = by_name.get(name)
                s = next((s for s in (c or {}).get("servers", []) if s["server"] == server), None)
                m = s and s["status"] == "ok" and s.get("summary")
                if not m or not m.get("rps"):
                    continue
                xs.append(i - 0.4 + width * (k + 0.5))
                ys.append(m["rps"])
                lo.append(m["rps"] - m["rps_min"])
                hi.append(m["rps_max"] - m["rps"])
            if xs:
                ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=color[server], label=server)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=20, ha="right")
        ax.set_ylabel("req/s")
        ax.set_title(f"{scenario}: throughput, server on {n} core{'s' if n > 1 else ''}")
        ax.grid(axis="y", alpha=0.3)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:.0f}k"))
    axes[0, 0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def latency(scenario, n, cases, path):
    servers = _servers(cases)
    color = _colors(servers)
    cols = min(3, len(cases))
    rows = math.ceil(len(cases) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    xs_all = [-math.log10(1 - p / 100) for _, p in PCTS]
    for idx, c in enumerate(cases):
        ax = axes[idx // cols][idx % cols]
        for s in c["servers"]:
            m = s["status"] == "ok" and s.get("summary")
            if not m:
                continue
            pts = [(x, m["latency_us"].get(k)) for x, (k, _) in zip(xs_all, PCTS)]
            pts = [(x, v / 1000) for x, v in pts if v]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                        color=color[s["server"]], label=s["server"])
        ax.set_yscale("log")
        ax.set_xticks(xs_all)
        ax.set_xticklabels([k.replace("_", ".") for k, _ in PCTS])
        ax.set_ylabel("latency ms (log)")
        ax.set_title(f"{c['case']} ({c['connections']} conn.)")
        ax.grid(alpha=0.3, which="both")
        if idx == 0:
            ax.legend(fontsize=7, loc="upper left")
    for idx in range(len(cases), rows * cols):
        axes[idx // cols][idx % cols].axis("off")
    fig.suptitle(f"{scenario}: latency percentiles (wrk, corrected), server on {n} core{'s' if n > 1 else ''}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def draw(doc, results_dir):
    out_dir = os.path.join(results_dir, "charts")
    os.makedirs(out_dir, exist_ok=True)
    by_scenario = {}
    for c in doc["cases"]:
        by_scenario.setdefault(c["scenario"], []).append(c)
    charts = {}
    for scenario, cases in by_scenario.items():
        paths = []
        rel = f"charts/{scenario}-throughput.svg"
        throughput(scenario, cases, os.path.join(results_dir, rel))
        paths.append(rel)
        for n in sorted({c["cpus"] for c in cases}):
            rel = f"charts/{scenario}-{n}cpu-latency.svg"
            latency(scenario, n, [c for c in cases if c["cpus"] == n], os.path.join(results_dir, rel))
            paths.append(rel)
        charts[scenario] = paths
    return charts
