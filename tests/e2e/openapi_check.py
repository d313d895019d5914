"""Validates `squall serve` answers against docs/daemon.openapi.json (OpenAPI 3.1).

Each answer is checked against its operation: the status must be one the operation documents,
and a JSON body must validate against that response's schema (JSON Schema 2020-12, with the
distribution's python3-jsonschema: its RefResolver follows "#/components/..." inside the
OpenAPI file and the squall.result/1 schema's absolute $id to docs/result.schema.json).
"""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC_PATH = os.path.join(ROOT, "docs", "daemon.openapi.json")
RESULT_PATH = os.path.join(ROOT, "docs", "result.schema.json")


class OpenAPI:
    def __init__(self):
        import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

        self.js = jsonschema
        with open(SPEC_PATH) as f:
            self.spec = json.load(f)
        with open(RESULT_PATH) as f:
            self.result_schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(self.result_schema)
        self.resolver = jsonschema.RefResolver(
            base_uri="", referrer=self.spec,
            store={self.result_schema["$id"]: self.result_schema})
        self.checked = set()  # (method, path, status) seen: the suite asserts its coverage

    def schema_of(self, method, path, status, ctype="application/json"):
        ops = self.spec["paths"].get(path)
        if ops is None:
            raise AssertionError("%s is not in the OpenAPI file" % path)
        op = ops.get(method.lower())
        if op is None:
            raise AssertionError("%s %s is not in the OpenAPI file" % (method, path))
        resp = op["responses"].get(str(status))
        if resp is None:
            raise AssertionError("%s %s answered %d, which the OpenAPI file does not document (%s)"
                                 % (method, path, status, ", ".join(op["responses"])))
        content = resp.get("content")
        if not content:
            return None
        media = content.get(ctype)
        if media is None:
            raise AssertionError("%s %s %d: content type %s is not documented (%s)"
                                 % (method, path, status, ctype, ", ".join(content)))
        return media.get("schema")

    def validate(self, method, path, status, body, ctype="application/json"):
        """body: bytes or an already parsed document. Raises AssertionError with every error."""
        ctype = (ctype or "").split(";")[0].strip()
        schema = self.schema_of(method, path, status, ctype)
        self.checked.add((method.upper(), path, status))
        if schema is None or ctype != "application/json":
            return None
        doc = json.loads(body) if isinstance(body, (bytes, str)) else body
        v = self.js.Draft202012Validator(schema, resolver=self.resolver)
        errors = ["%s: %s" % ("/".join(map(str, e.absolute_path)) or "(root)", e.message)
                  for e in v.iter_errors(doc)]
        if errors:
            raise AssertionError("%s %s %d: the answer does not match the OpenAPI file:\n  %s"
                                 % (method, path, status, "\n  ".join(errors[:10])))
        return doc

    def operations(self):
        """Every (METHOD, path) the file documents."""
        out = set()
        for p, ops in self.spec["paths"].items():
            for m in ops:
                if m in ("get", "put", "post", "delete"):
                    out.add((m.upper(), p))
        return out
