#!/usr/bin/env python3
"""Check the links of a built mdBook site (no network).

Usage: docs_linkcheck.py <book dir>

Every page's href/src is checked: a relative link must name a file inside
the book, and a #fragment must be an id (or a name) in the page it points
to. External links (http, https, mailto) are only syntax-checked.
mdBook's generated print.html and 404.html are skipped (they repeat the
pages' links with rewritten paths). Exits non-zero listing every broken
link.
"""

import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

SKIP = {"print.html", "404.html", "toc.html"}
LINK_ATTRS = {"a": "href", "img": "src", "link": "href", "script": "src",
              "iframe": "src", "source": "src"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("id", "name"):
            if a.get(k):
                self.ids.add(a[k])
        want = LINK_ATTRS.get(tag)
        if want and a.get(want) is not None:
            self.links.append((tag, a[want], self.getpos()[0]))


def parse(path, cache={}):
    if path not in cache:
        p = Page()
        with open(path, encoding="utf-8", errors="replace") as f:
            p.feed(f.read())
        cache[path] = p
    return cache[path]


def check_external(url):
    u = urlsplit(url)
    if u.scheme in ("http", "https"):
        return bool(u.netloc) and " " not in url
    if u.scheme == "mailto":
        return "@" in u.path
    return False


def main():
    if len(sys.argv) != 2:
        print("usage: docs_linkcheck.py <book dir>", file=sys.stderr)
        return 2
    root = os.path.realpath(sys.argv[1])
    errors = []
    pages = 0
    links = 0
    for d, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".html") or (d == root and name in SKIP):
                continue
            path = os.path.join(d, name)
            rel = os.path.relpath(path, root)
            pages += 1
            page = parse(path)
            for tag, url, line in page.links:
                links += 1
                where = f"{rel}:{line}: <{tag}> {url!r}"
                u = urlsplit(url)
                if u.scheme or url.startswith("//"):
                    if not check_external(url):
                        errors.append(f"{where}: malformed external link")
                    continue
                if url.startswith("/"):
                    errors.append(f"{where}: absolute path (breaks when the book is not at the site root)")
                    continue
                target = path
                if u.path:
                    target = os.path.realpath(os.path.join(d, unquote(u.path)))
                    if os.path.isdir(target):
                        target = os.path.join(target, "index.html")
                    if not (target == root or target.startswith(root + os.sep)):
                        errors.append(f"{where}: points outside the book")
                        continue
                    if not os.path.isfile(target):
                        errors.append(f"{where}: no such file in the book")
                        continue
                if u.fragment:
                    if not target.endswith(".html"):
                        continue
                    if unquote(u.fragment) not in parse(target).ids:
                        errors.append(f"{where}: no anchor #{u.fragment} in {os.path.relpath(target, root)}")
    for e in errors:
        print("docs-linkcheck:", e, file=sys.stderr)
    if pages == 0:
        print("docs-linkcheck: FAIL: no pages found", file=sys.stderr)
        return 1
    if errors:
        print(f"docs-linkcheck: FAIL: {len(errors)} broken links in {pages} pages", file=sys.stderr)
        return 1
    print(f"docs-linkcheck: OK ({links} links in {pages} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
