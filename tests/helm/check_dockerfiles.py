#!/usr/bin/env python3
"""Checks docker/*.Dockerfile without Docker (none runs here; run by dockerfiles.sh).

  1. every stage is FROM debian:bookworm*; the build stages of all Dockerfiles are identical
     (one cached build serves both images);
  2. every COPY source (not --from) exists in the repository and is let through by the
     Dockerfile's .dockerignore;
  3. the build stage's sources, copied alone into a temp dir, configure with CMake using the
     stage's `scripts/build.sh` arguments, and every binary a final stage copies out of
     /src/build/bin is a target there whose build `ninja -n` can plan (all inputs present);
  4. every apt package named exists in Debian bookworm (apt-cache, from this machine's lists);
  5. the final stage's packages (with their Depends, recursively, and bookworm-slim's required
     packages) provide every shared library the binaries need (NEEDED of this machine's
     build/bin, this machine being bookworm too); no compiler or -dev package in a final stage;
  6. the final stage runs as a numeric non-root USER.
Exit 0 if all hold, 1 otherwise. Usage: check_dockerfiles.py SOURCE_DIR BUILD_DIR
"""
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

src, build_dir = sys.argv[1:3]
failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL:", msg)
    return ok


def sh(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def parse(path):
    """[(stage name or None, base, [(INSTRUCTION, rest), ...]), ...]."""
    text = re.sub(r"\\\n", " ", open(path).read())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            stages.append((m.group(2), m.group(1), []))
        elif stages:
            stages[-1][2].append((instr, " ".join(rest.split())))
    return stages


def apt_packages(instrs):
    pkgs = []
    for instr, rest in instrs:
        if instr != "RUN":
            continue
        for m in re.finditer(r"apt-get install ((?:\s*(?:-\S+|[a-z0-9][a-z0-9.+-]+))+)", rest):
            pkgs += [p for p in m.group(1).split() if not p.startswith("-")]
    return pkgs


def dockerignore_allows(patterns, path):
    allowed = True
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        if (pat == "**" or fnmatch.fnmatch(path, pat) or path.startswith(pat.rstrip("/") + "/")
                or path == pat):
            allowed = neg
    return allowed


dockerfiles = sorted(glob.glob(os.path.join(src, "docker", "*.Dockerfile")))
check(len(dockerfiles) >= 2, "expected docker/runtime.Dockerfile and docker/operator.Dockerfile")
build_stages, finals = {}, {}
for df in dockerfiles:
    name = os.path.relpath(df, src)
    stages = parse(df)
    ignore_file = df + ".dockerignore"
    patterns = [l.strip() for l in open(ignore_file) if l.strip() and not l.startswith("#")] \
        if check(os.path.exists(ignore_file), "%s has no %s" % (name, ignore_file)) else []
    for sname, base, instrs in stages:
        check(base.startswith("debian:bookworm"), "%s: stage from %s, not Debian bookworm" %
              (name, base))
        for instr, rest in instrs:
            if instr == "COPY" and "--from=" not in rest:
                for s in rest.split()[:-1]:
                    check(os.path.exists(os.path.join(src, s)), "%s: COPY %s: no such file in "
                          "the repository" % (name, s))
                    check(dockerignore_allows(patterns, s.rstrip("/")),
                          "%s: COPY %s: excluded by its .dockerignore" % (name, s))
    named = {s[0]: s for s in stages if s[0]}
    check("build" in named, "%s: no stage named build" % name)
    if "build" in named:
        build_stages[name] = named["build"]
    finals[name] = stages[-1]

# 1. one build stage for all
texts = {n: s[2] for n, s in build_stages.items()}
check(len({repr(t) for t in texts.values()}) == 1,
      "the build stages differ between %s; keep them identical so one build serves all" %
      sorted(texts))

# 3. configure the build stage's sources alone
binaries = {}
for name, (_, _, instrs) in finals.items():
    for instr, rest in instrs:
        m = re.match(r"--from=build (.*) (\S+)$", rest) if instr == "COPY" else None
        if m:
            for p in m.group(1).split():
                check(p.startswith("/src/build/bin/"), "%s: copies %s, not a built binary" %
                      (name, p))
                binaries.setdefault(name, []).append(os.path.basename(p))
if build_stages:
    _, _, instrs = next(iter(build_stages.values()))
    ctx = tempfile.mkdtemp(prefix="tlt-docker-ctx.")
    try:
        build_args = None
        for instr, rest in instrs:
            if instr == "COPY":
                parts = rest.split()
                dest = parts[-1]
                for s in parts[:-1]:
                    target = os.path.join(ctx, dest.rstrip("/"), os.path.basename(s)) \
                        if dest.endswith("/") and not os.path.isdir(os.path.join(src, s)) \
                        else os.path.join(ctx, dest if dest not in ("./", ".") else s)
                    if os.path.isdir(os.path.join(src, s)):
                        shutil.copytree(os.path.join(src, s), target, symlinks=True)
                    else:
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        shutil.copy2(os.path.join(src, s), target)
            if instr == "RUN" and rest.startswith("scripts/build.sh"):
                build_args = rest.split()[1:]
        check(build_args is not None, "the build stage does not RUN scripts/build.sh")
        r = sh("cmake", "-S", ctx, "-B", ctx + "/build", "-G", "Ninja", *(build_args or []))
        if check(r.returncode == 0, "CMake cannot configure from the build stage's COPYs alone "
                 "(%s): %s" % (build_args, (r.stdout + r.stderr)[-1500:])):
            targets = sh("ninja", "-C", ctx + "/build", "-t", "targets", "all").stdout
            for name, bins in sorted(binaries.items()):
                for b in bins:
                    if check(re.search(r"^bin/%s:" % re.escape(b), targets, re.M) is not None,
                             "%s copies bin/%s, which CMake does not define" % (name, b)):
                        r = sh("ninja", "-C", ctx + "/build", "-n", "bin/" + b)
                        check(r.returncode == 0, "ninja cannot plan bin/%s from the copied "
                              "sources: %s" % (b, (r.stdout + r.stderr)[-800:]))
            print("CMake configures from the build stage's COPYs (%s); targets %s planned" %
                  (" ".join(build_args), sorted(b for v in binaries.values() for b in v)))
    finally:
        shutil.rmtree(ctx)

# 4 and 5. packages and libraries
if sh("apt-cache", "show", "libc6").returncode != 0:
    check(False, "apt-cache knows no packages: run apt-get update (scripts/setup.sh does)")
known_pkgs = {}


def exists(pkg):
    if pkg not in known_pkgs:
        known_pkgs[pkg] = sh("apt-cache", "show", "--no-all-versions", pkg).returncode == 0
    return known_pkgs[pkg]


def closure(pkgs):
    r = sh("apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
           "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *pkgs)
    return {l.strip().strip("<>") for l in r.stdout.splitlines() if not l.startswith(" ")}


required = set(sh("dpkg-query", "-W", "-f", "${Package} ${Priority}\\n").stdout.split("\n"))
base = {l.split()[0].split(":")[0] for l in required if l.endswith(" required")}
for name, (_, _, instrs) in list(build_stages.items()) + list(finals.items()):
    for p in apt_packages(instrs):
        check(exists(p), "%s: apt package %s is not in Debian bookworm" % (name, p))
for name, (_, _, instrs) in finals.items():
    pkgs = apt_packages(instrs)
    for p in pkgs:
        check(not (p.endswith("-dev") or p in ("g++", "gcc", "cmake", "ninja-build")),
              "%s: the final stage installs build tool %s" % (name, p))
    have = closure(pkgs) | base
    for b in binaries.get(name, []):
        path = os.path.join(build_dir, "bin", b)
        if not check(os.path.exists(path), "%s missing: build first (scripts/build.sh)" % path):
            continue
        needed = re.findall(r"NEEDED\s+(\S+)", sh("objdump", "-p", path).stdout)
        ldcache = sh("ldconfig", "-p").stdout
        for lib in needed:
            m = re.search(r"^\s*%s \(.*x86-64.*\) => (\S+)" % re.escape(lib), ldcache, re.M) or \
                re.search(r"^\s*%s .*=> (\S+)" % re.escape(lib), ldcache, re.M)
            if not check(m is not None, "%s needs %s, which this machine cannot resolve" %
                         (b, lib)):
                continue
            owner = sh("dpkg", "-S", os.path.realpath(m.group(1)))
            if owner.returncode != 0:
                owner = sh("dpkg", "-S", m.group(1))
            pkg = owner.stdout.split(":")[0].strip()
            check(pkg in have, "%s: %s needs %s (Debian package %s), which the final stage "
                  "does not install" % (name, b, lib, pkg or "?"))
        print("%s: %s needs %d shared libraries, all from the final stage's packages" %
              (name, b, len(needed)))

# 6. non-root
for name, (_, _, instrs) in finals.items():
    users = [rest for instr, rest in instrs if instr == "USER"]
    check(users and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", users[-1]) is not None,
          "%s: the final stage must end as a numeric non-root USER (got %s)" % (name, users))

if failures:
    print("FAIL: %d problem(s) in the Dockerfiles" % len(failures))
    sys.exit(1)
print("ok: %d Dockerfiles" % len(dockerfiles))
