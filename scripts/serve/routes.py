"""Asks every route of a serving API without the key, and each GET route
with it: one JSON line per route on stdout, {"method", "path", "without",
"with"} (HTTP statuses; "with" is null for what is not a GET, which is
never sent with the key: it could generate or change something).

The routes are the ones named as "METHOD PATH" arguments, plus, with
--openapi, every path and method the server's /openapi.json lists (asked
with the key; a path parameter becomes "x"). A request without the key has
an empty JSON body, so a route that does not check the key answers 4xx/2xx
rather than 401.

usage: python3 routes.py URL API_KEY_FILE [--openapi] ["METHOD PATH"]...
"""

import json
import re
import sys
import urllib.error
import urllib.request


def ask(url, method, key):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = b"{}" if method in ("POST", "PUT", "PATCH") else None
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read(1 << 16)
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main():
    url, key_file = sys.argv[1].rstrip("/"), sys.argv[2]
    with open(key_file) as f:
        key = f.read().strip()
    wanted = []
    for a in sys.argv[3:]:
        if a == "--openapi":
            req = urllib.request.Request(url + "/openapi.json", headers={"Authorization": "Bearer " + key})
            with urllib.request.urlopen(req, timeout=30) as r:
                spec = json.load(r)
            for path, ops in spec.get("paths", {}).items():
                for method in ops:
                    if method.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                        wanted.append((method.upper(), re.sub(r"\{[^}]*\}", "x", path)))
        else:
            method, path = a.split(" ", 1)
            wanted.append((method, path))
    seen = set()
    for method, path in wanted:
        if (method, path) in seen:
            continue
        seen.add((method, path))
        without = ask(url + path, method, None)
        with_key = ask(url + path, method, key) if method == "GET" else None
        print(json.dumps({"method": method, "path": path, "without": without, "with": with_key}), flush=True)


main()
