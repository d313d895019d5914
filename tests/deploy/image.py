#!/usr/bin/env python3
"""The container image (deploy/Dockerfile) built and run, where a Docker engine answers.

ctest's deploy.image: exit 77 (skipped) without a reachable Docker daemon, so CI builds the
image only where Docker is available. It builds the image from this checkout, then checks that
the binary runs in the runtime stage (every shared library present): `--version`, the agent's
help, and the image's default use, an agent, left running for 3 s with no NATS to reach (it must
keep waiting and say which server it cannot reach, not exit). Every container is removed by
name, the image by its tag.
"""
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TAG = "squall-test:%d" % os.getpid()


def docker(*args, timeout=60, check=True):
    p = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise SystemExit("docker %s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout,
                                                       p.stderr))
    return p


def main():
    try:
        if docker("info", timeout=20, check=False).returncode != 0:
            print("skipped: no Docker daemon answers")
            return 77
    except (OSError, subprocess.TimeoutExpired):
        print("skipped: no docker client, or the daemon does not answer")
        return 77
    t0 = time.monotonic()
    docker("build", "-f", os.path.join(ROOT, "deploy", "Dockerfile"), "-t", TAG, ROOT,
           timeout=1500)
    print("built %s in %.0f s" % (TAG, time.monotonic() - t0))
    agent = "sq-agent-%d" % os.getpid()
    try:
        out = docker("run", "--rm", "--network", "none", TAG, "--version").stdout
        if "squall" not in out:
            raise SystemExit("--version said: %r" % out)
        p = docker("run", "--rm", "--network", "none", TAG, "agent", "--help", check=False)
        if p.returncode != 0 or "--nats" not in p.stdout + p.stderr:
            raise SystemExit("agent --help: exit %d: %s%s" % (p.returncode, p.stdout, p.stderr))
        # an agent with no NATS to reach keeps waiting (it reconnects by itself) and says why
        docker("run", "-d", "--name", agent, "--network", "none", TAG, "agent", "--nats",
               "nats://127.0.0.1:4222")
        time.sleep(3)
        st = docker("inspect", "-f", "{{.State.Running}}", agent).stdout.strip()
        logs = docker("logs", agent).stderr + docker("logs", agent).stdout
        if st != "true":
            raise SystemExit("the agent exited: %s" % logs)
        if "cannot connect to the NATS server at 127.0.0.1:4222" not in logs:
            raise SystemExit("the agent did not report the unreachable server: %r" % logs)
    finally:
        docker("rm", "-f", agent, check=False)
        docker("rmi", "-f", TAG, check=False)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
