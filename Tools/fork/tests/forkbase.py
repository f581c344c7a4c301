"""The fork's upstream bases as the tests see them (Tools/fork/pin.sh).

The base is $TRACEMALLOC_FORK_BASE (`make BASE=...` exports it), else the
default of Tools/fork/pin.sh.  Its build tree is $BUILD_DIR (make exports
it), else build/BASE.
"""

import os
import subprocess

FORK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(FORK))
PIN_NAMES = ("FORK_BASE", "FORK_DEFAULT_BASE", "FORK_PATCHES",
             "UPSTREAM_VERSION", "UPSTREAM_TARBALL", "UPSTREAM_SHA256",
             "UPSTREAM_URL", "DEBIAN_SOURCE_PACKAGE", "DEBIAN_SOURCE_VERSION",
             "DEBIAN_SUITE", "DEBIAN_ORIG_TARBALL", "ENGINE_PORTED",
             "FORK_CACHE")


def bases():
    """Every base that has a pin file, sorted by version."""
    names = os.listdir(os.path.join(FORK, "bases"))
    return sorted((name for name in names
                   if os.path.isfile(os.path.join(FORK, "bases", name,
                                                  "pin.sh"))),
                  key=lambda name: tuple(map(int, name.split("."))))


def pins(base=None):
    """The pin of BASE (default: the chosen base) as a dict, read by
    sourcing pin.sh with POSIX sh, as the Makefile does."""
    env = dict(os.environ)
    if base is not None:
        env["TRACEMALLOC_FORK_BASE"] = base
    script = "here=\"$1\"; . \"$here/pin.sh\" && " + " && ".join(
        f'printf "%s=%s\\n" {name} "${name}"' for name in PIN_NAMES)
    out = subprocess.run(["sh", "-c", script, "sh", FORK], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if out.returncode != 0:
        raise ValueError(out.stderr.strip())
    return dict(line.split("=", 1) for line in out.stdout.splitlines())


def chosen_base():
    return pins()["FORK_BASE"]


def build_dir(base=None):
    """The build tree (pristine/, src/, obj/) of BASE or the chosen base."""
    if base is None and os.environ.get("BUILD_DIR"):
        return os.environ["BUILD_DIR"]
    return os.path.join(REPO, "build", base or chosen_base())
