#!/usr/bin/env python3
"""Checks docker/*.Dockerfile without Docker (none runs here; run by dockerfiles.sh).

Two families: the Debian images (every stage FROM debian:bookworm*, but for the `binaries` stage
FROM scratch that --build-context binaries=DIR replaces) and the CUDA runtime image
(docker/runtime-cuda.Dockerfile, every stage FROM nvidia/cuda:<X.Y.Z>-<kind>-ubuntu<N>).

  1. Debian: the build stages of all Debian Dockerfiles are identical (one cached build serves
     both images). CUDA: one CUDA version and Ubuntu for all stages, a devel build stage and a
     base/runtime final one; its build stage copies exactly what the Debian build stage copies
     and its final stage copies out the same binaries as docker/runtime.Dockerfile's;
  2. every COPY source (not --from) exists in the repository and is let through by the
     Dockerfile's .dockerignore;
  3. the build stage's sources, copied alone into a temp dir, configure with CMake using the
     stage's `scripts/build.sh` arguments, and every binary a final stage copies out of
     /src/build/bin (directly, or through the binaries stage) is a target there whose build `ninja -n` can plan (all inputs present).
     CUDA: with this machine's CUDA torch in place of /opt/torch (TLT_GPU_PYTHON, else
     ~/.cache/tlt/gpu-venv) and an nvcc (CUDA_HOME, PATH, or the toolkit scripts/gpu-check.sh
     assembles from the wheels); without them this check is skipped and says so. The torch pin
     must be that torch's version, whose CUDA must be the images' (major.minor);
  4. every apt package named in a Debian Dockerfile exists in bookworm (apt-cache, from this
     machine's lists); Ubuntu's package names are not checked here;
  5. a Debian final stage's packages (with their Depends, recursively, and bookworm-slim's
     required packages) provide every shared library the binaries need (NEEDED of this
     machine's build/bin, this machine being bookworm too); no compiler or -dev package in any
     final stage;
  6. the final stage runs as a numeric non-root USER.
Exit 0 if all hold, 1 otherwise. Usage: check_dockerfiles.py SOURCE_DIR BUILD_DIR
"""
import fnmatch
import glob
import os
import re
import shlex
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
CUDA_BASE = re.compile(r"nvidia/cuda:(\d+\.\d+)\.\d+-(devel|runtime|base)(?:-cudnn\d*)?-ubuntu(\S+)")
build_stages, finals, family, cuda_of, staged = {}, {}, {}, {}, {}
for df in dockerfiles:
    name = os.path.relpath(df, src)
    stages = parse(df)
    ignore_file = df + ".dockerignore"
    patterns = [l.strip() for l in open(ignore_file) if l.strip() and not l.startswith("#")] \
        if check(os.path.exists(ignore_file), "%s has no %s" % (name, ignore_file)) else []
    family[name] = "cuda" if stages and stages[0][1].startswith("nvidia/cuda:") else "debian"
    for i, (sname, base, instrs) in enumerate(stages):
        if family[name] == "debian":
            check(base.startswith("debian:bookworm") or (base, sname) == ("scratch", "binaries"),
                  "%s: stage from %s, not Debian bookworm" % (name, base))
        else:
            m = CUDA_BASE.fullmatch(base)
            if check(m is not None, "%s: stage from %s, not nvidia/cuda:X.Y.Z-KIND-ubuntuN" %
                     (name, base)):
                check(cuda_of.setdefault(name, (m.group(1), m.group(3))) == (m.group(1), m.group(3)),
                      "%s: stages on different CUDA or Ubuntu versions" % name)
                kind_ok = m.group(2) == "devel" if sname == "build" else \
                    (m.group(2) != "devel" or i < len(stages) - 1)
                check(kind_ok, "%s: stage %s from %s: build from -devel-, ship -base- or -runtime-"
                      % (name, sname or i, base))
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
    # The binaries stage (replaced by --build-context binaries=DIR): built binaries, at /.
    for instr, rest in named.get("binaries", (None, None, []))[2]:
        m = re.match(r"--from=build (.*) /$", rest) if instr == "COPY" else None
        check(instr != "COPY" or m is not None, "%s: the binaries stage's COPY %s: copy built "
              "binaries from the build stage to /" % (name, rest))
        for p in (m.group(1).split() if m else []):
            check(p.startswith("/src/build/bin/"), "%s: the binaries stage copies %s, not a built "
                  "binary" % (name, p))
            staged.setdefault(name, set()).add(os.path.basename(p))

# 1. one build stage for all Debian images
texts = {n: s[2] for n, s in build_stages.items() if family[n] == "debian"}
check(len({repr(t) for t in texts.values()}) == 1,
      "the build stages differ between %s; keep them identical so one build serves all" %
      sorted(texts))


def source_copies(instrs):
    return [rest for instr, rest in instrs if instr == "COPY" and "--from=" not in rest]


debian_build = next((s for n, s in sorted(build_stages.items()) if family[n] == "debian"), None)
for name in sorted(n for n in build_stages if family[n] == "cuda"):
    if debian_build:
        check(source_copies(build_stages[name][2]) == source_copies(debian_build[2]),
              "%s: its build stage copies %s, the Debian build stage %s: keep them the same" %
              (name, source_copies(build_stages[name][2]), source_copies(debian_build[2])))

# 3. configure the build stage's sources alone
binaries = {}
for name, (_, _, instrs) in finals.items():
    for instr, rest in instrs:
        m = re.match(r"--from=binaries (.*) (\S+)$", rest) if instr == "COPY" else None
        for p in (m.group(1).split() if m else []):
            check(p.lstrip("/") in staged.get(name, ()), "%s: copies %s from the binaries stage, "
                  "which does not hold it" % (name, p))
            binaries.setdefault(name, []).append(p.lstrip("/"))
        m = re.match(r"--from=build (.*) (\S+)$", rest) if instr == "COPY" else None
        if m:
            for p in m.group(1).split():
                if p.startswith("/src/build/bin/"):
                    binaries.setdefault(name, []).append(os.path.basename(p))
                else:  # the CUDA image also takes LibTorch and its package list from the build
                    check(family[name] == "cuda" and (p.startswith("/opt/torch/") or
                                                      p == "/src/build/runtime-packages.txt"),
                          "%s: copies %s, not a built binary" % (name, p))
for name in sorted(n for n in finals if family[n] == "cuda"):
    check(sorted(binaries.get(name, [])) == sorted(binaries.get("docker/runtime.Dockerfile", [])),
          "%s ships %s, docker/runtime.Dockerfile %s: the same binaries" %
          (name, binaries.get(name), binaries.get("docker/runtime.Dockerfile")))


def configure_and_plan(instrs, names, what, translate=lambda a: a, extra=(), env=None):
    """Copies the stage's COPY sources alone into a temp dir, configures them with the stage's
    scripts/build.sh arguments and plans the binaries the final stages `names` copy out."""
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
                build_args = [translate(a) for a in shlex.split(rest)[1:]]
        if not check(build_args is not None, "%s: the build stage does not RUN scripts/build.sh"
                     % what):
            return
        r = sh("cmake", "-S", ctx, "-B", ctx + "/build", "-G", "Ninja", *build_args, *extra,
               env=env)
        if not check(r.returncode == 0, "%s: CMake cannot configure from the build stage's COPYs "
                     "alone (%s): %s" % (what, build_args, (r.stdout + r.stderr)[-1500:])):
            return
        targets = sh("ninja", "-C", ctx + "/build", "-t", "targets", "all").stdout
        planned = []
        for name in names:
            for b in binaries.get(name, []):
                if check(re.search(r"^bin/%s:" % re.escape(b), targets, re.M) is not None,
                         "%s copies bin/%s, which CMake does not define" % (name, b)):
                    r = sh("ninja", "-C", ctx + "/build", "-n", "bin/" + b)
                    check(r.returncode == 0, "%s: ninja cannot plan bin/%s from the copied "
                          "sources: %s" % (what, b, (r.stdout + r.stderr)[-800:]))
                    planned.append(b)
        print("%s: CMake configures from the build stage's COPYs (%s); targets %s planned" %
              (what, " ".join(build_args), sorted(set(planned))))
    finally:
        shutil.rmtree(ctx)


def local_cuda_torch():
    """(python, version, CUDA version, torch dir, toolkit root) of this machine's CUDA torch, or
    a sentence saying what is missing."""
    py = os.environ.get("TLT_GPU_PYTHON") or os.path.expanduser("~/.cache/tlt/gpu-venv/bin/python")
    if not shutil.which(py):
        return "no CUDA torch here (TLT_GPU_PYTHON, or ~/.cache/tlt/gpu-venv: pip install torch)"
    r = sh(py, "-c", "import os, torch; print(torch.__version__, torch.version.cuda, "
           "os.path.dirname(torch.__file__))")
    if r.returncode != 0 or len(r.stdout.split()) != 3 or r.stdout.split()[1] == "None":
        return "%s has no CUDA torch: %s" % (py, (r.stdout + r.stderr)[-300:])
    version, cuda, torch_dir = r.stdout.split()
    nvcc = shutil.which("nvcc")
    for root in (os.environ.get("CUDA_HOME"), nvcc and os.path.dirname(os.path.dirname(nvcc)),
                 "/usr/local/cuda", os.path.expanduser("~/.cache/tlt/cuda-%s-wheels" % cuda)):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return py, version, cuda, torch_dir, root
    return "no nvcc for CUDA %s here (scripts/gpu-check.sh assembles one from the wheels)" % cuda


# 3. configure the build stages' sources alone
debian_names = sorted(n for n in finals if family[n] == "debian")
if debian_build:
    configure_and_plan(debian_build[2], debian_names, "Debian images")
for name in sorted(n for n in build_stages if family[n] == "cuda"):
    instrs = build_stages[name][2]
    pins = re.findall(r"torch==([0-9][0-9.]*)", " ".join(r for i, r in instrs if i == "RUN"))
    check(len(pins) == 1, "%s: pin exactly one torch==VERSION in the build stage" % name)
    found = local_cuda_torch()
    if isinstance(found, str):
        print("SKIP: %s: not configured: %s" % (name, found))
        continue
    py, version, cuda, torch_dir, toolkit = found
    if pins and version.split("+")[0] == pins[0]:
        check(cuda == cuda_of.get(name, ("?",))[0], "%s: torch==%s is built for CUDA %s, the "
              "images are CUDA %s" % (name, pins[0], cuda, cuda_of.get(name, ("?",))[0]))
    else:
        print("note: %s pins torch==%s, this machine has %s: CUDA versions not cross-checked" %
              (name, pins[0] if pins else "?", version))
    env = dict(os.environ, PATH=os.path.join(toolkit, "bin") + os.pathsep + os.environ["PATH"],
               CUDACXX=os.path.join(toolkit, "bin", "nvcc"))
    configure_and_plan(
        instrs, [name], "%s (torch %s, CUDA %s, nvcc in %s)" % (name, version, cuda, toolkit),
        translate=lambda a: a.replace("/opt/torch/torch", torch_dir),
        extra=("-DCUDA_TOOLKIT_ROOT_DIR=" + toolkit, "-DCUDAToolkit_ROOT=" + toolkit), env=env)

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
    if family[name] != "debian":
        continue
    for p in apt_packages(instrs):
        check(exists(p), "%s: apt package %s is not in Debian bookworm" % (name, p))
for name, (_, _, instrs) in finals.items():
    pkgs = apt_packages(instrs)
    for p in pkgs:
        check(not (p.endswith("-dev") or p in ("g++", "gcc", "cmake", "ninja-build")),
              "%s: the final stage installs build tool %s" % (name, p))
    if family[name] != "debian":
        print("%s: Ubuntu packages and the binaries' libraries not checked here (the image "
              "checks its own with ldd)" % name)
        continue
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
# ... and the runtime images' user is the one the operator runs job pods as (runAsUser and
# runAsGroup kRuntimeUser in operator/controller/desired.h), so runAsNonRoot pods start.
m = re.search(r"kRuntimeUser = ([0-9]+);", open(os.path.join(src, "operator/controller/desired.h")).read())
if check(m is not None, "operator/controller/desired.h has no kRuntimeUser"):
    for name, (_, _, instrs) in finals.items():
        if "runtime" not in name:
            continue
        users = [rest for instr, rest in instrs if instr == "USER"]
        check(users and users[-1] == "%s:%s" % (m.group(1), m.group(1)),
              "%s: USER %s, but the operator runs job pods as %s:%s (kRuntimeUser)" % (
                  name, users[-1] if users else None, m.group(1), m.group(1)))

if failures:
    print("FAIL: %d problem(s) in the Dockerfiles" % len(failures))
    sys.exit(1)
print("ok: %d Dockerfiles" % len(dockerfiles))
