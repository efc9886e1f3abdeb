#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema (draft 2020-12), with
Debian's python3-jsonschema: the tests' check of every /api/v1/job answer
they read against docs/api/job.schema.json.

usage: check_schema.py SCHEMA DOCUMENTS
DOCUMENTS holds one JSON document a line. Exit 0 when every one is valid;
1 with each error (the document's line, the path in it, the message);
2 when the validator itself is missing or the schema is not a schema."""
import json
import sys


def main():
    try:
        import jsonschema
    except ImportError:
        print("check_schema.py: python3-jsonschema is missing: install it (scripts/deps.sh does)", file=sys.stderr)
        return 2
    schema_path, docs_path = sys.argv[1], sys.argv[2]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        print(f"check_schema.py: {schema_path} is not a valid schema: {e.message}", file=sys.stderr)
        return 2
    validator = jsonschema.Draft202012Validator(schema)
    bad = 0
    with open(docs_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            doc = json.loads(line)
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
                path = "/".join(str(p) for p in e.absolute_path) or "(the document)"
                print(f"document {n}: at {path}: {e.message}")
                bad += 1
                if bad > 50:
                    print("(more errors not shown)")
                    return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
