#!/usr/bin/python3
"""tests/perf/check_publish.py RESULTS_DIR WORK_DIR: run perf/publish on a
perf/run results directory (a --quick one, so with --allow-quick) into
WORK_DIR, and check the page it writes: the machine, every version, the
exact perf/run command, every case's section and table of REPORT.md, the
charts copied beside it and linked relative to it, the quick-run warning;
and that without --allow-quick a quick run is refused. Never a speed.
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def publish_module():
    """perf/publish as a module (a script without .py), for its portable()."""
    path = os.path.join(REPO, "perf", "publish")
    loader = importlib.machinery.SourceFileLoader("perf_publish", path)
    spec = importlib.util.spec_from_loader("perf_publish", loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    results, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out, charts = os.path.join(work, "RESULTS.md"), os.path.join(work, "results-published")
    publish = [os.path.join(REPO, "perf", "publish"), "--out", out, "--charts-dir", charts, results]
    errors = []

    def need(cond, msg):
        if not cond:
            errors.append(msg)

    doc = json.load(open(os.path.join(results, "results.json"), encoding="utf-8"))
    report = open(os.path.join(results, "REPORT.md"), encoding="utf-8").read()
    if doc["settings"].get("mode") == "quick":
        r = subprocess.run(publish, capture_output=True, text=True)
        need(r.returncode != 0 and "--quick" in r.stderr, f"a quick run was published without --allow-quick: {r}")
        need(not os.path.exists(out), "RESULTS.md written for a refused quick run")
    r = subprocess.run(publish[:1] + ["--allow-quick"] + publish[1:], capture_output=True, text=True)
    need(r.returncode == 0, f"perf/publish --allow-quick failed: {r.stderr}")
    page = open(out, encoding="utf-8").read() if os.path.exists(out) else ""
    need(page.startswith("# coring: published benchmark results"), "no title")
    if doc["settings"].get("mode") == "quick":
        need("Not for quoting" in page, "no quick-run warning")
    header = next((l for l in page.splitlines() if l.startswith("Written by")), "")
    need(f"commit **{doc['versions']['coring_commit']}**" in header, "the header does not name the commit")
    for key in ("cpu_model", "kernel", "nproc", "os"):
        need(str(doc["machine"][key]) in page, f"machine.{key} missing")
    for k, v in doc["versions"].items():
        need(f"| {k} | " in page and v.replace("|", "/") in page, f"version of {k} missing")
    # The page shows the command as perf/publish's portable() does (no
    # folder of the machine that ran it).
    cmd = publish_module().portable(doc["commands"]["perf_run"])
    need(f"`{cmd}`" in page, f"the perf/run command {cmd!r} is missing")
    for b in doc["commands"]["build"]:
        need(b in page, f"build command {b!r} missing")
    for c in doc["cases"]:
        head = f"### {c['scenario']} / {c['case']}, {c['cpus']} core"
        need(head in report and head in page, f"section {head!r} missing")
    tables = [l for l in report.splitlines() if l.startswith("| ")]
    need(tables and all(l in page for l in tables), "a table row of REPORT.md is missing")
    links = re.findall(r"!\[[^]]*\]\(([^)]+)\)", page)
    want = sum(len(v) for v in (doc.get("charts") or {}).values() if isinstance(v, list))
    need(len(links) == want, f"{len(links)} chart links, want {want}")
    for l in links:
        need(not l.startswith("/") and l.startswith("results-published/"), f"chart link {l!r} not relative")
        need(os.path.isfile(os.path.join(work, l)), f"chart {l} not copied")
    # The run is stored beside its charts, and can be published again
    # from there (one scenario rerun, the others kept as measured).
    stored = os.path.join(charts, os.path.basename(os.path.normpath(results)))
    for f in ("results.json", "REPORT.md"):
        need(os.path.isfile(os.path.join(stored, f)), f"{f} not stored in {stored}")
    for f in ("results.json", "REPORT.md"):
        path = os.path.join(stored, f)
        text = open(path, encoding="utf-8").read() if os.path.isfile(path) else ""
        need(REPO + os.sep not in text, f"the stored {f} names the repository's folder on this machine")
    need(REPO + os.sep not in page, "the page names the repository's folder on this machine")
    again = os.path.join(work, "RESULTS-again.md")
    r = subprocess.run([publish[0], "--allow-quick", "--out", again, "--charts-dir", charts, stored],
                       capture_output=True, text=True)
    need(r.returncode == 0, f"perf/publish of the stored run failed: {r.stderr}")
    page2 = open(again, encoding="utf-8").read() if os.path.exists(again) else ""
    need(tables and all(l in page2 for l in tables), "a table row is missing from the page republished from the store")
    links2 = re.findall(r"!\[[^]]*\]\(([^)]+)\)", page2)
    need(links2 == links, f"republished chart links {links2} differ from {links}")
    need(all(os.path.isfile(os.path.join(work, l)) for l in links2), "a republished chart is gone")
    # --attach: another tool's Markdown section, appended, stored, listed.
    src = os.path.join(work, "attach-src")
    os.makedirs(src)
    section = "## Attached: a section of its own\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n"
    with open(os.path.join(src, "extra.md"), "w", encoding="utf-8") as f:
        f.write("preamble, not published\n\n" + section)
    with_attach = os.path.join(work, "RESULTS-attach.md")
    r = subprocess.run([publish[0], "--allow-quick", "--out", with_attach, "--charts-dir", charts,
                        "--attach", os.path.join(src, "extra.md"), stored], capture_output=True, text=True)
    need(r.returncode == 0, f"perf/publish --attach failed: {r.stderr}")
    page3 = open(with_attach, encoding="utf-8").read() if os.path.exists(with_attach) else ""
    need(page3.rstrip("\n").endswith(section.rstrip("\n")), "the attached section is not at the end")
    need("preamble" not in page3, "the attached file's text before its section was published")
    need(re.search(r"published with `perf/publish --attach \S*attach-src/extra\.md ", page3),
         "the attachment is not in the publish command")
    need(not re.search(r"--attach /", page3), "the attachment is named by a folder of this machine")
    need(os.path.isfile(os.path.join(charts, "attach-src", "extra.md")), "the attachment is not stored")
    r = subprocess.run([publish[0], "--allow-quick", "--out", with_attach, "--attach", "/nonexistent.md", stored],
                       capture_output=True, text=True)
    need(r.returncode != 0 and "--attach" in r.stderr, "a missing attachment was not refused")
    for e in errors:
        print("FAIL", e)
    if errors:
        sys.exit(1)
    print(f"ok: {out}: {len(links)} charts, {len(tables)} table rows, {len(doc['cases'])} case sections")


if __name__ == "__main__":
    main()
