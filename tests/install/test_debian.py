#!/usr/bin/python3
"""install_debian: coring's Debian packages (debian/), built, installed on
this machine, used and removed.

test_debian.py [--sanitized]

1. `dpkg-buildpackage -us -uc -b` on a copy of the tree (the files git
   knows: a clean checkout's): coring, libcoring0, libcoring-dev;
2. lintian on them: no error and no warning (debian/*.lintian-overrides
   keep the two that are meant, each with its reason);
3. installed (apt-get, which takes their dependencies from the archive if
   any is missing): the user coring is made, /usr/bin/coring runs, the unit
   and its drop-in (User=coring) and the environment file (0600) are there,
   pkg-config and CMake find the library;
4. examples/notes built against the installed libcoring-dev (CMake and
   pkg-config) and its test run on a real PostgreSQL (db/pg-local);
5. purged: none of their files is left.

Skipped (77): without dpkg-buildpackage or debhelper (.ci/install-deps test
installs them), when not root, in a sanitizer build (the packages are built
apart from it: the first pass runs this), and when one of the packages is
installed already (it is not this test's to remove). The build takes a few
minutes: its own timeout (tests/install/CMakeLists.txt).
"""
import argparse
import glob
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import coring_server as cs  # noqa: E402

PACKAGES = ("coring", "libcoring0", "libcoring-dev")


def run(*cmd, env=None, cwd=None, timeout=1200, check=True):
    r = subprocess.run(list(cmd), env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-4000:],
                                                   r.stderr[-4000:]))
    return r


def installed(package):
    r = run("dpkg-query", "-W", "-f=${Status}", package, check=False)
    return r.returncode == 0 and "install ok installed" in r.stdout


def skip_reason():
    for tool in ("dpkg-buildpackage", "dh", "apt-get"):
        if not shutil.which(tool):
            return "no %s (.ci/install-deps test installs dpkg-dev and debhelper)" % tool
    if os.geteuid() != 0:
        return "not root: the packages cannot be installed"
    already = [p for p in PACKAGES if installed(p)]
    if already:
        return "%s installed already: not this test's to remove" % ", ".join(already)
    return None


class DebianTest(unittest.TestCase):
    maxDiff = None

    def test_build_install_use_remove(self):
        tmp = tempfile.mkdtemp(prefix="coring-debian-")
        self.addCleanup(shutil.rmtree, tmp, True)
        os.chmod(tmp, 0o755)
        src = os.path.join(tmp, "coring")
        files = run("git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
        for f in filter(None, files.split("\0")):
            if os.path.lexists(os.path.join(ROOT, f)):
                os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
                shutil.copy2(os.path.join(ROOT, f), os.path.join(src, f), follow_symlinks=False)

        # 1. build
        env = dict(os.environ, DEB_BUILD_OPTIONS="parallel=%d" % (os.cpu_count() or 1))
        run("dpkg-buildpackage", "-us", "-uc", "-b", cwd=src, env=env, timeout=1500)
        debs = {p: glob.glob(os.path.join(tmp, "%s_*.deb" % p)) for p in PACKAGES}
        self.assertTrue(all(len(v) == 1 for v in debs.values()), debs)
        contents = run("dpkg-deb", "-c", debs["libcoring0"][0]).stdout
        self.assertIn("libcoring.so.0", contents)

        # 2. lintian
        if shutil.which("lintian"):
            changes = glob.glob(os.path.join(tmp, "*.changes"))
            r = run("lintian", "--fail-on", "error,warning", *changes, check=False)
            self.assertEqual(r.returncode, 0, "lintian:\n" + r.stdout + r.stderr)
        else:
            print("lintian not installed: not run (.ci/install-deps test installs it)")

        # 3. install (and, whatever happens next, purge)
        self.addCleanup(run, "apt-get", "purge", "-y", *PACKAGES, check=False)
        run("apt-get", "install", "-y", "--no-install-recommends", *[debs[p][0] for p in PACKAGES],
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        listed = set()
        for p in PACKAGES:
            listed.update(line for line in run("dpkg", "-L", p).stdout.splitlines()
                          if not os.path.isdir(line))  # files and links (/lib is a link too)
        self.assertEqual(run("id", "-u", "coring").returncode, 0)
        self.assertEqual(run("getent", "passwd", "coring").stdout.split(":")[6].strip(),
                         "/usr/sbin/nologin")
        self.assertRegex(run("/usr/bin/coring", "--version").stdout, r"^coring \d+\.\d+\.\d+\n$")
        with open("/lib/systemd/system/coring.service") as f:
            unit = f.read()
        self.assertIn("ExecStart=/usr/bin/coring", unit)
        self.assertIn("EnvironmentFile=/etc/coring/coring.env", unit)
        with open("/lib/systemd/system/coring.service.d/debian.conf") as f:
            self.assertIn("User=coring", f.read())
        mode = os.stat("/etc/coring/coring.env")
        self.assertEqual((stat.S_IMODE(mode.st_mode), mode.st_uid), (0o600, 0))
        self.assertTrue(os.path.exists("/usr/share/man/man1/coring.1.gz"))
        self.assertRegex(run("pkg-config", "--modversion", "coring").stdout, r"^\d+\.\d+\.\d+$")

        # 4. the example, against the installed libcoring-dev
        notes = os.path.join(tmp, "notes")
        shutil.copytree(os.path.join(ROOT, "examples", "notes"), notes)
        postgres = cs.LocalPostgres("coring-debian-pg-")
        self.addCleanup(postgres.remove)
        postgres.run("start", "throwaway")
        env = dict(os.environ, DATABASE_URL=postgres.url())
        for var in ("PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH"):
            env.pop(var, None)
        build = os.path.join(notes, "build")
        run("cmake", "-S", notes, "-B", build, env=env)
        run("cmake", "--build", build, env=env)
        self.assertIn("100% tests passed", run("ctest", "--test-dir", build, "--output-on-failure",
                                               env=env).stdout)
        run("make", "-C", notes, env=env)
        run("make", "-C", notes, "check", env=env)
        self.assertIn("/lib/x86_64-linux-gnu/libcoring.so.0" if os.path.exists("/lib/x86_64-linux-gnu")
                      else "libcoring.so.0", run("ldd", os.path.join(notes, "notes")).stdout)

        # 5. purge: nothing of theirs left
        run("apt-get", "purge", "-y", *PACKAGES, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        self.assertFalse([p for p in PACKAGES if installed(p)])
        left = sorted(f for f in listed if os.path.lexists(f))
        self.assertEqual(left, [], "files left after purging the packages")
        self.assertFalse(os.path.exists("/etc/coring/coring.env"), "the conffile outlived the purge")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sanitized", action="store_true")
    ns, rest = ap.parse_known_args()
    why = "a sanitizer build: the first pass builds the packages" if ns.sanitized else skip_reason()
    if why:
        print("SKIP: " + why)
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
