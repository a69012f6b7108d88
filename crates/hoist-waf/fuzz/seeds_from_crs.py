#!/usr/bin/env python3
"""Seeds for the crs_requests fuzz target from the CRS regression corpus (go-ftw YAML).

    python3 seeds_from_crs.py CRS_TESTS_DIR OUT_DIR

Writes one file per stage in the target's input form: the request line, one `Name: value`
line per header, a blank line, the body. Stages given as `encoded_request` (raw bytes that
go-ftw sends as they are) are skipped: the target splits its input itself. Needs PyYAML.
"""
import os
import sys

import yaml


def stages(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        doc = yaml.safe_load(f)
    for test in (doc or {}).get("tests") or []:
        for n, stage in enumerate(test.get("stages") or []):
            yield f"{doc.get('rule_id')}-{test.get('test_id')}-{n}", stage.get("input") or {}


def seed(inp):
    if "encoded_request" in inp:
        return None
    method = inp.get("method", "GET")
    uri = inp.get("uri", "/")
    version = inp.get("version", "HTTP/1.1")
    lines = [f"{method} {uri} {version}"]
    for name, value in (inp.get("headers") or {}).items():
        lines.append(f"{name}: {value}")
    data = inp.get("data") or ""
    if isinstance(data, list):
        data = "\r\n".join(data)
    return ("\n".join(lines) + "\n\n" + str(data)).encode("utf-8", "replace")


def main():
    tests, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    written = 0
    for root, _, files in os.walk(tests):
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml")):
                continue
            for key, inp in stages(os.path.join(root, name)):
                data = seed(inp)
                if data is None:
                    continue
                with open(os.path.join(out, key), "wb") as f:
                    f.write(data)
                written += 1
    print(f"{written} seeds in {out}")


if __name__ == "__main__":
    main()
