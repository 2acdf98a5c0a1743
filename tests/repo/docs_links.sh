#!/usr/bin/env bash
# tests/repo/docs_links.sh: the README and the docs/ pages link to files
# that exist. Every relative Markdown link ([text](path), [text](path#anchor))
# in a tracked .md file must name a file or folder of the repository, and
# an anchor into a .md file must name one of its headings (GitHub's slugs).
# Links inside code (fenced blocks, `inline`) and absolute URLs are not
# checked. Exit 1 with each broken link as FILE:LINE: TARGET.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t pages < <(git ls-files '*.md')
else
  mapfile -t pages < <(find . -name '*.md' -not -path './build*' -not -path '*/node_modules/*' | sed 's|^\./||')
fi
exec /usr/bin/python3 - "${pages[@]}" <<'PY'
import os, re, sys

LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")

def prose_lines(path):
    """(line number, text) outside fenced code, with inline code blanked."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.match(r"\s*(`{3,}|~{3,})", line)
            if m:
                if fence is None:
                    fence = m.group(1)[0] * len(m.group(1))
                elif m.group(1).startswith(fence):
                    fence = None
                continue
            if fence is None:
                yield n, re.sub(r"`+[^`]*`+", "", line)

def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped."""
    # Emphasis underscores go (_x_); those inside a word stay (DATABASE_URL).
    s = re.sub(r"`|\*|(?<!\w)_(?=\w)|(?<=\w)_(?!\w)", "", heading.strip().lower())
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def anchors(path):
    seen, out = {}, set()
    fence = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*(`{3,}|~{3,})", line)
            if m:
                fence = None if fence else m.group(1)
                continue
            h = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if h and not fence:
                base = slug(h.group(1))
                k = seen.get(base, 0)
                seen[base] = k + 1
                out.add(base if k == 0 else f"{base}-{k}")
    return out

broken = []
for page in sys.argv[1:]:
    for n, text in prose_lines(page):
        for m in list(LINK.finditer(text)) + list(IMAGE.finditer(text)):
            target = m.group(1)
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if dest.startswith(".." + os.sep) or dest == "..":
                broken.append(f"{page}:{n}: {target} (outside the repository)")
            elif not os.path.exists(dest):
                broken.append(f"{page}:{n}: {target} (no such file)")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append(f"{page}:{n}: {target} (no such heading in {dest})")
if broken:
    print("broken links in the documentation:")
    print("\n".join(broken))
    sys.exit(1)
print(f"every relative link in {len(sys.argv) - 1} Markdown files resolves")
PY
