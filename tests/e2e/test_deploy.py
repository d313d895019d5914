"""deploy/: the Kubernetes manifests against a schema of the Kubernetes fields they use, the
cross-references between them (Service to pods, controller to agents, flags to squall), and the
image definition's syntax. No cluster and no Docker engine are needed: a typo fails here.

The schema is a strict subset of the Kubernetes API (apps/v1 Deployment, v1 Service, v1
ConfigMap, batch/v1 Job): every object lists the fields squall's manifests may use, with their
types, and refuses any other key, so `comand:` or `completionMod:` cannot land.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import jsonschema
import yaml

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")

NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
STRMAP = {"type": "object", "additionalProperties": {"type": "string"}}
QTY = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$"}


def obj(props, required=()):
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


def arr(items):
    return {"type": "array", "items": items}


METADATA = obj({"name": NAME, "namespace": NAME, "labels": STRMAP, "annotations": STRMAP},
               ["name"])
PORT = {"oneOf": [{"type": "integer", "minimum": 1, "maximum": 65535}, NAME]}
RESOURCES = obj({"requests": obj({"cpu": QTY, "memory": QTY}),
                 "limits": obj({"cpu": QTY, "memory": QTY})})
ENV = obj({"name": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
           "value": {"type": "string"},
           "valueFrom": obj({"fieldRef": obj({"fieldPath": {"type": "string"}}, ["fieldPath"])},
                            ["fieldRef"])}, ["name"])
CONTAINER = obj({
    "name": NAME, "image": {"type": "string", "minLength": 1},
    "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
    "command": arr({"type": "string"}), "args": arr({"type": "string"}),
    "env": arr(ENV),
    "ports": arr(obj({"name": NAME, "containerPort": PORT,
                      "protocol": {"enum": ["TCP", "UDP"]}}, ["containerPort"])),
    "readinessProbe": obj({"httpGet": obj({"path": {"type": "string"}, "port": PORT},
                                          ["port"])}),
    "resources": RESOURCES,
    "volumeMounts": arr(obj({"name": NAME, "mountPath": {"type": "string"},
                             "readOnly": {"type": "boolean"}}, ["name", "mountPath"])),
}, ["name", "image"])
POD_TEMPLATE = obj({
    "metadata": obj({"labels": STRMAP, "annotations": STRMAP}),
    "spec": obj({
        "restartPolicy": {"enum": ["Always", "OnFailure", "Never"]},
        "containers": {**arr(CONTAINER), "minItems": 1},
        "volumes": arr(obj({"name": NAME, "configMap": obj({"name": NAME}, ["name"])},
                           ["name"])),
        "topologySpreadConstraints": arr(obj({
            "maxSkew": {"type": "integer", "minimum": 1},
            "topologyKey": {"type": "string"},
            "whenUnsatisfiable": {"enum": ["DoNotSchedule", "ScheduleAnyway"]},
            "labelSelector": obj({"matchLabels": STRMAP})},
            ["maxSkew", "topologyKey", "whenUnsatisfiable"])),
    }, ["containers"]),
}, ["spec"])
COUNT = {"type": "integer", "minimum": 0}
KINDS = {
    ("apps/v1", "Deployment"): obj({
        "apiVersion": {}, "kind": {}, "metadata": METADATA,
        "spec": obj({"replicas": COUNT, "selector": obj({"matchLabels": STRMAP}, ["matchLabels"]),
                     "template": POD_TEMPLATE}, ["selector", "template"])},
        ["apiVersion", "kind", "metadata", "spec"]),
    ("v1", "Service"): obj({
        "apiVersion": {}, "kind": {}, "metadata": METADATA,
        "spec": obj({"type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                     "selector": STRMAP,
                     "ports": {**arr(obj({"name": NAME, "port": PORT, "targetPort": PORT,
                                          "protocol": {"enum": ["TCP", "UDP"]}}, ["port"])),
                               "minItems": 1}},
                    ["selector", "ports"])},
        ["apiVersion", "kind", "metadata", "spec"]),
    ("v1", "ConfigMap"): obj({"apiVersion": {}, "kind": {}, "metadata": METADATA, "data": STRMAP},
                             ["apiVersion", "kind", "metadata", "data"]),
    ("batch/v1", "Job"): obj({
        "apiVersion": {}, "kind": {}, "metadata": METADATA,
        "spec": obj({"completionMode": {"enum": ["NonIndexed", "Indexed"]},
                     "completions": COUNT, "parallelism": COUNT, "backoffLimit": COUNT,
                     "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                     "template": POD_TEMPLATE}, ["template"])},
        ["apiVersion", "kind", "metadata", "spec"]),
}

# The Dockerfile instructions (docs.docker.com/reference/dockerfile).
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
                "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK",
                "SHELL"}


def load_manifests():
    docs = []
    for name in sorted(os.listdir(os.path.join(DEPLOY, "k8s"))):
        if name.endswith(".yaml"):
            with open(os.path.join(DEPLOY, "k8s", name)) as f:
                docs += [(name, d) for d in yaml.safe_load_all(f) if d is not None]
    return docs


def flag_value(args, flag):
    i = args.index(flag)
    return args[i + 1]


class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_manifests()
        cls.by = {(d["kind"], d["metadata"]["name"]): d for _, d in cls.docs}

    def test_schema(self):
        self.assertGreaterEqual(len(self.docs), 5)
        for name, d in self.docs:
            key = (d.get("apiVersion"), d.get("kind"))
            self.assertIn(key, KINDS, "%s: %s is not a kind the manifests may use" % (name, key))
            try:
                jsonschema.validate(d, KINDS[key])
            except jsonschema.ValidationError as e:
                self.fail("%s: %s %s: %s at %s" % (name, d["kind"], d["metadata"].get("name"),
                                                   e.message, "/".join(map(str, e.path))))

    def test_schema_catches_typos(self):
        # the test can fail: a misspelt key anywhere is refused
        job = json.loads(json.dumps(self.by[("Job", "squall-agents")]))
        job["spec"]["template"]["spec"]["containers"][0]["comand"] = ["x"]
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(job, KINDS[("batch/v1", "Job")])
        job = json.loads(json.dumps(self.by[("Job", "squall-agents")]))
        job["spec"]["completionMode"] = "indexed"
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(job, KINDS[("batch/v1", "Job")])

    def test_service_reaches_nats(self):
        svc = self.by[("Service", "squall-nats")]
        dep = self.by[("Deployment", "squall-nats")]
        pod = dep["spec"]["template"]
        for k, v in svc["spec"]["selector"].items():
            self.assertEqual(pod["metadata"]["labels"].get(k), v)
        self.assertEqual(dep["spec"]["selector"]["matchLabels"],
                         {k: pod["metadata"]["labels"][k]
                          for k in dep["spec"]["selector"]["matchLabels"]})
        names = {p.get("name") for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            self.assertIn(p["targetPort"], names)

    def test_agents_and_controller_agree(self):
        agents = self.by[("Job", "squall-agents")]
        ctl = self.by[("Job", "squall-controller")]
        svc = self.by[("Service", "squall-nats")]
        spec = agents["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        self.assertEqual(spec["completions"], spec["parallelism"])
        a = spec["template"]["spec"]["containers"][0]
        c = ctl["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(a["args"][0], "agent")
        self.assertEqual(c["args"][0], "run")
        url = "nats://%s:%d" % (svc["metadata"]["name"], svc["spec"]["ports"][0]["port"])
        self.assertEqual(flag_value(a["args"], "--nats"), url)
        self.assertEqual(flag_value(c["args"], "--nats"), url)
        self.assertEqual(int(flag_value(c["args"], "--agents")), spec["completions"])
        self.assertIn("--once", a["args"])
        # the completion index names the agent, through the documented annotation
        env = {e["name"]: e for e in a["env"]}
        for ref in re.findall(r"\$\((\w+)\)", " ".join(a["args"])):
            self.assertIn(ref, env, "$(%s) is not in the container's env" % ref)
        idx = re.search(r"\$\((\w+)\)", flag_value(a["args"], "--name")).group(1)
        self.assertEqual(env[idx]["valueFrom"]["fieldRef"]["fieldPath"],
                         "metadata.annotations['batch.kubernetes.io/job-completion-index']")
        self.assertEqual(a["image"], c["image"])

    def test_plan_is_mounted_and_valid(self):
        ctl = self.by[("Job", "squall-controller")]
        pod = ctl["spec"]["template"]["spec"]
        c = pod["containers"][0]
        path = c["args"][1]
        mount = [m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        self.assertEqual(len(mount), 1, path)
        vol = [v for v in pod["volumes"] if v["name"] == mount[0]["name"]][0]
        cm = self.by[("ConfigMap", vol["configMap"]["name"])]
        key = path[len(mount[0]["mountPath"]) + 1:]
        self.assertIn(key, cm["data"])
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, key)
            with open(plan, "w") as f:
                f.write(cm["data"][key])
            p, _ = sqtest.run_squall("validate", plan)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_flags_exist(self):
        # every flag the manifests pass is one squall knows (its --help lists it)
        for job, face in (("squall-agents", ["agent"]), ("squall-controller", ["run"])):
            c = self.by[("Job", job)]["spec"]["template"]["spec"]["containers"][0]
            p, _ = sqtest.run_squall(*face, "--help")
            self.assertEqual(p.returncode, 0, p.stderr)
            for a in c["args"]:
                if a.startswith("--"):
                    self.assertIn(a, p.stdout, "%s: %s is not a flag of squall %s" %
                                  (job, a, face[0]))


class Image(unittest.TestCase):
    def lines(self):
        """The Dockerfile's instructions, continuation lines joined, comments dropped."""
        out, cur = [], ""
        with open(os.path.join(DEPLOY, "Dockerfile")) as f:
            for raw in f:
                line = raw.rstrip("\n")
                if not cur and (not line.strip() or line.lstrip().startswith("#")):
                    continue
                if line.endswith("\\"):
                    cur += line[:-1] + " "
                    continue
                out.append(cur + line)
                cur = ""
        self.assertEqual(cur, "", "a continuation line at the end of the file")
        return out

    def test_syntax(self):
        stages, froms = set(), []
        for line in self.lines():
            word = line.split()[0]
            self.assertIn(word, INSTRUCTIONS, "unknown instruction: %r" % line)
            if word == "FROM":
                m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$", line, re.I)
                self.assertIsNotNone(m, line)
                froms.append(m.group(1))
                if m.group(2):
                    stages.add(m.group(2))
            if word == "COPY" and "--from=" in line:
                self.assertIn(re.search(r"--from=(\S+)", line).group(1), stages)
            if word in ("ENTRYPOINT", "CMD"):
                rest = line.split(None, 1)[1]
                self.assertIsInstance(json.loads(rest), list, line)
        self.assertEqual(froms, ["debian:12-slim", "debian:12-slim"])  # multi-stage, Debian 12

    def test_runtime_has_every_library(self):
        # the runtime stage installs a package for every shared library the binary links
        if not shutil.which("ldd") or not shutil.which("dpkg"):
            self.skipTest("no ldd or dpkg")
        runtime = [l for l in self.lines() if l.startswith("RUN")][-1]
        out = subprocess.run(["ldd", sqtest.squall_path()], capture_output=True, text=True).stdout
        libs = re.findall(r"=> (/\S+)", out)
        if any(re.search(r"/lib(a|ub|t)san\.so", l) for l in libs):
            # make test-asan / test-tsan: an instrumented binary links the sanitizers' runtimes
            # (and libstdc++ for them); the image builds a plain one, checked by make test
            self.skipTest("a sanitizer build")
        paths = set()
        for lib in libs:
            real = os.path.realpath(lib)
            paths |= {lib, real, real.replace("/lib/", "/usr/lib/", 1)}
        # one dpkg query for them all (it names the package of each path it knows)
        q = subprocess.run(["dpkg", "-S", *sorted(paths)], capture_output=True, text=True)
        owner = {}
        for line in q.stdout.splitlines():
            pkg, path = line.split(": ", 1)
            owner[os.path.basename(path)] = pkg.split(":")[0]
        installed = set(runtime.split())
        for lib in libs:
            pkg = owner.get(os.path.basename(lib)) or owner.get(
                os.path.basename(os.path.realpath(lib)))
            self.assertIsNotNone(pkg, "no package owns %s" % lib)
            if pkg != "libc6":
                self.assertIn(pkg, installed, "%s (%s) is not installed in the runtime stage"
                              % (lib, pkg))

if __name__ == "__main__":
    sqtest.main()
