# A stand-in for nixpkgs, for tests/nix/check-flake.sh only: coring's flake is
# evaluated against it (`--override-input nixpkgs path:tests/nix/stub-nixpkgs`)
# where the real nixpkgs cannot be fetched (no network). It provides exactly
# the attributes coring's flake.nix uses, each one that real nixpkgs has
# (names checked against the nixpkgs tree of late 2026, after 26.05), and
# nothing else: a misspelt or missing
# attribute, or an argument the real function does not take, fails evaluation.
# No catch-alls (no `...` in the builders' arguments, no attribute generated
# from an arbitrary name).
#
# The derivations are real `builtins.derivation`s, so their drvPath evaluates
# (forcing every input), but none of them builds: their builder exits 1.
# Adding an attribute to coring's flake.nix? Add it here, with the same
# meaning it has in nixpkgs.
{
  description = "stub nixpkgs for coring's flake structure check (evaluation only, nothing builds)";

  outputs =
    { self }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];

      genAttrs =
        names: f:
        builtins.listToAttrs (
          map (n: {
            name = n;
            value = f n;
          }) names
        );

      escapeShellArg =
        arg:
        let
          s = toString arg;
        in
        if builtins.match "[[:alnum:],._+:@%/-]+" s == null then
          "'${builtins.replaceStrings [ "'" ] [ "'\\''" ] s}'"
        else
          s;

      lib = {
        inherit genAttrs escapeShellArg;
        optionals = cond: list: if cond then list else [ ];
        optionalString = cond: s: if cond then s else "";
        concatStringsSep = builtins.concatStringsSep;
        escapeShellArgs = args: builtins.concatStringsSep " " (map escapeShellArg args);
        makeBinPath = pkgs: builtins.concatStringsSep ":" (map (p: "${p}/bin") pkgs);
        # Real nixpkgs warns and guesses from the name when meta.mainProgram is
        # missing; the stub refuses, so that coring never relies on a guess.
        getExe =
          x:
          if x ? meta.mainProgram then
            "${x}/bin/${x.meta.mainProgram}"
          else
            throw "stub lib.getExe: ${x.name} has no meta.mainProgram";
        platforms.linux = [
          "x86_64-linux"
          "aarch64-linux"
          "i686-linux"
          "armv7l-linux"
          "riscv64-linux"
        ];
      };

      notBuildable = [
        "-c"
        "echo 'stub nixpkgs (tests/nix/stub-nixpkgs): evaluation only, nothing builds' >&2; exit 1"
      ];

      # The meta attributes coring uses (all real, see nixpkgs' meta.nix).
      metaKeys = [
        "description"
        "mainProgram"
        "platforms"
        "license"
        "homepage"
      ];
      checkKeys =
        what: allowed: attrs:
        let
          unknown = builtins.filter (k: !(builtins.elem k allowed)) (builtins.attrNames attrs);
        in
        if unknown == [ ] then
          true
        else
          throw "stub ${what}: unknown attribute(s) ${
            builtins.concatStringsSep ", " (map (k: "'${k}'") unknown)
          } (the stub takes the ones coring uses, all real; add one only if nixpkgs has it)";

      forSystem =
        system:
        let
          # A stand-in package: a derivation named like the real one.
          pkg =
            name:
            builtins.derivation {
              inherit system;
              name = "${name}-stub";
              builder = "/bin/sh";
              args = notBuildable;
            };

          # stdenv.mkDerivation: every attribute goes into the derivation (so
          # its value is forced when drvPath is), except meta and passthru. The
          # attributes accepted are the stdenv / setup-hook ones coring uses.
          mkDerivationAttrs = [
            "pname"
            "version"
            "name"
            "outputs"
            "src"
            "nativeBuildInputs"
            "buildInputs"
            "nativeCheckInputs"
            "postPatch"
            "cmakeFlags"
            "cmakeBuildType"
            "dontStrip"
            "doCheck"
            "checkPhase"
            "installPhase"
            "shellHook"
            "meta"
            "passthru"
          ];
          mkStdenv =
            cc:
            let
              stdenv = {
                inherit cc;
                mkDerivation =
                  attrs:
                  assert checkKeys "stdenv.mkDerivation" mkDerivationAttrs attrs;
                  assert checkKeys "stdenv.mkDerivation meta" metaKeys (attrs.meta or { });
                  let
                    name = attrs.name or "${attrs.pname}-${attrs.version}";
                    drv = builtins.derivation (
                      builtins.removeAttrs attrs [
                        "meta"
                        "passthru"
                      ]
                      // {
                        inherit system name;
                        builder = "/bin/sh";
                        args = notBuildable;
                        stdenvCC = cc;
                      }
                    );
                  in
                  drv
                  // (attrs.passthru or { })
                  // {
                    meta = attrs.meta or { };
                  };
              };
            in
            stdenv;

          stdenv = mkStdenv (pkg "gcc-wrapper");
          clangStdenv = mkStdenv (pkg "clang-wrapper");

          # writeShellApplication: the real one's arguments (no `...`); the
          # script text is built as the real one builds it, so that it can be
          # checked with `bash -n`.
          writeShellApplication =
            {
              name,
              text,
              runtimeInputs ? [ ],
              runtimeEnv ? null,
              meta ? { },
              passthru ? { },
              checkPhase ? null,
              excludeShellChecks ? [ ],
              extraShellCheckFlags ? [ ],
            }:
            assert runtimeEnv == null; # not supported by the stub
            builtins.derivation {
              inherit system name;
              builder = "/bin/sh";
              args = notBuildable;
              text =
                ''
                  #!/bin/bash
                  set -o errexit
                  set -o nounset
                  set -o pipefail
                ''
                + lib.optionalString (runtimeInputs != [ ]) ''

                  export PATH="${lib.makeBinPath runtimeInputs}:$PATH"
                ''
                + ''

                  ${text}
                '';
            }
            // passthru
            // {
              meta = {
                mainProgram = name;
              }
              // meta;
            };

          mkShellWith =
            shellStdenv:
            {
              name ? "nix-shell",
              packages ? [ ],
              inputsFrom ? [ ],
              shellHook ? "",
            }:
            shellStdenv.mkDerivation {
              inherit name shellHook;
              nativeBuildInputs = packages;
              buildInputs = inputsFrom;
            };
          # callPackage'd in nixpkgs, so it has .override (of its arguments:
          # the stub takes stdenv only).
          mkShell = {
            __functor = _: mkShellWith stdenv;
            override = { stdenv }: mkShellWith stdenv;
          };
        in
        {
          inherit
            stdenv
            clangStdenv
            writeShellApplication
            mkShell
            ;

          # build tools
          cmake = pkg "cmake";
          pkg-config = pkg "pkg-config-wrapper";
          ninja = pkg "ninja";

          # libraries coring links
          liburing = pkg "liburing";
          systemd = pkg "systemd";
          simdjson = pkg "simdjson";
          double-conversion = pkg "double-conversion";
          libpq = pkg "libpq";
          curl = pkg "curl";
          zstd = pkg "zstd";
          brotli = pkg "brotli";
          libdeflate = pkg "libdeflate";
          openblas = pkg "openblas";
          utf8proc = pkg "utf8proc";
          criterion = pkg "criterion";

          # runtime and test tools
          postgresql = pkg "postgresql";
          python3 = pkg "python3";
          coreutils = pkg "coreutils";
          findutils = pkg "findutils";
          gawk = pkg "gawk";
          gnugrep = pkg "gnugrep";
          gnused = pkg "gnused";
          procps = pkg "procps";
          util-linux = pkg "util-linux";

          # benchmarks and profiling
          wrk = pkg "wrk";
          nginx = pkg "nginx";
          nodejs = pkg "nodejs";
          linuxPackages = {
            perf = pkg "perf-linux";
          };
          flamegraph = pkg "FlameGraph";
          inferno = pkg "inferno";

          # developer tools
          clang-tools = pkg "clang-tools";
          valgrind = pkg "valgrind";
          gdb = pkg "gdb";
          shellcheck = pkg "shellcheck";
        };
    in
    {
      inherit lib;
      legacyPackages = genAttrs systems forSystem;
    };
}
