#!/usr/bin/python3
"""install_example: coring as a user gets it from `cmake --install`, and a
service built on it outside the tree (examples/notes).

test_install.py --build BUILD_DIR [--sanitized]

- `cmake --install BUILD_DIR --prefix TMP/prefix`: the files a user finds
  there (the libraries with their SONAME links, the headers, coring.pc, the
  CMake package, the binary, coring(1), the unit with the install's paths);
  each installed header compiles on its own; the installed coring answers
  --version; its man page has every flag of its --help.
- examples/notes, copied out of the tree, built against that prefix three
  ways: CMake with coring::coring, CMake with coring::coring_static,
  pkg-config (its Makefile); each build's own test (test_notes.py) run with
  a real PostgreSQL (db/pg-local, as the integration tests).
Skipped (77) for a sanitizer build: the library it installs needs the
sanitizer's runtime in whatever links it, which coring.pc does not say.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import coring_server as cs  # noqa: E402

BUILD = None


def run(*cmd, env=None, cwd=None, timeout=600):
    r = subprocess.run(list(cmd), env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:],
                                                   r.stderr[-3000:]))
    return r.stdout


class InstallTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="coring-install-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        os.chmod(cls.tmp, 0o755)
        cls.prefix = os.path.join(cls.tmp, "prefix")
        run("cmake", "--install", BUILD, "--prefix", cls.prefix)
        libs = glob.glob(os.path.join(cls.prefix, "lib*", "**", "libcoring.so"), recursive=True)
        if len(libs) != 1:
            raise AssertionError("libcoring.so in the install: %r" % libs)
        cls.libdir = os.path.dirname(libs[0])

    def installed(self, path):
        return os.path.join(self.prefix, path)

    def test_files(self):
        so = os.path.join(self.libdir, "libcoring.so")
        self.assertTrue(os.path.islink(so), "libcoring.so is the development link")
        soname = os.readlink(so)
        self.assertRegex(soname, r"^libcoring\.so\.\d+$")
        self.assertRegex(os.readlink(os.path.join(self.libdir, soname)), r"^libcoring\.so\.\d+\.\d+\.\d+$")
        for path in ("bin/coring", "share/man/man1/coring.1", "lib/systemd/system/coring.service",
                     "etc/coring/coring.env", "include/coring/core/version.h", "include/coring/apps/stock.h"):
            self.assertTrue(os.path.exists(self.installed(path)), path)
        for path in ("libcoring.a", "pkgconfig/coring.pc", "cmake/coring/coringConfig.cmake",
                     "cmake/coring/coringConfigVersion.cmake", "cmake/coring/coringTargets.cmake"):
            self.assertTrue(os.path.exists(os.path.join(self.libdir, path)), path)
        self.assertFalse(glob.glob(self.installed("include/coring/embed")), "the encoder's headers are the app's")
        self.assertEqual(os.stat(self.installed("etc/coring/coring.env")).st_mode & 0o777, 0o600)
        with open(self.installed("lib/systemd/system/coring.service")) as f:
            unit = f.read()
        self.assertIn("ExecStart=%s/bin/coring" % self.prefix, unit)
        self.assertIn("EnvironmentFile=%s/etc/coring/coring.env" % self.prefix, unit)

    def test_each_header_compiles_alone(self):
        include = self.installed("include")
        headers = sorted(glob.glob(os.path.join(include, "coring", "*", "*.h")))
        self.assertGreater(len(headers), 20)
        for h in headers:
            with self.subTest(header=os.path.relpath(h, include)):
                run("cc", "-std=gnu17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", include,
                    "-include", h, "-x", "c", os.devnull)

    def test_installed_binary_and_its_man_page(self):
        coring = self.installed("bin/coring")
        self.assertRegex(run(coring, "--version"), r"^coring \d+\.\d+\.\d+\n$")
        flags = set(re.findall(r"^  --([a-z0-9-]+)", run(coring, "--help"), re.M))
        self.assertGreater(len(flags), 40)
        page = self.installed("share/man/man1/coring.1")
        with open(page, encoding="utf-8") as f:
            source = f.read().replace("\\-", "-")
        in_page = set(re.findall(r"--([a-z0-9-]+)", source))
        self.assertEqual(sorted(flags - in_page), [], "flags of --help missing from coring(1)")
        r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", page], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual((r.returncode, r.stderr), (0, ""), "man --warnings on coring(1)")

    def test_example_built_three_ways(self):
        notes = os.path.join(self.tmp, "notes")
        shutil.copytree(os.path.join(ROOT, "examples", "notes"), notes)  # outside the tree
        postgres = cs.LocalPostgres("coring-install-pg-")
        self.addCleanup(postgres.remove)
        postgres.run("start", "throwaway")
        env = dict(os.environ, DATABASE_URL=postgres.url())
        env.pop("PKG_CONFIG_PATH", None)
        for name, link in (("cmake", "OFF"), ("cmake-static", "ON")):
            with self.subTest(build=name):
                build = os.path.join(notes, "build-" + name)
                run("cmake", "-S", notes, "-B", build, "-DCMAKE_PREFIX_PATH=" + self.prefix,
                    "-DNOTES_STATIC=" + link, env=env)
                run("cmake", "--build", build, env=env)
                needs = run("readelf", "-d", os.path.join(build, "notes"))
                self.assertEqual("libcoring.so" in needs, link == "OFF", needs)
                out = run("ctest", "--test-dir", build, "--output-on-failure", env=env)
                self.assertIn("100% tests passed", out)
                self.assertNotIn("Skipped", out)
        with self.subTest(build="pkg-config"):
            pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(self.libdir, "pkgconfig"))
            run("make", "-C", notes, env=pc_env)
            run("make", "-C", notes, "check", env=pc_env)  # exit 0: every test passed


def main():
    global BUILD
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--sanitized", action="store_true")
    ns, rest = ap.parse_known_args()
    if ns.sanitized:
        print("SKIP: a sanitizer build: what it installs needs the sanitizer's runtime to link")
        sys.exit(77)
    BUILD = os.path.abspath(ns.build)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
