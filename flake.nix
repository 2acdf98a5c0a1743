{
  description = "coring: a C17 HTTP/1.1 server runtime on io_uring, one ring per core";

  # nixpkgs: a stable release branch. There is no flake.lock yet: this flake was
  # written on machines without network, and a lock file can only be made by
  # fetching nixpkgs (its narHash). The first `nix flake lock` (or any
  # `nix run` / `nix build` with network) writes one; commit it to pin nixpkgs.
  # Every nixpkgs attribute used below is also provided by the stub flake in
  # tests/nix/stub-nixpkgs, which tests/nix/check-flake.sh evaluates this flake
  # against: add an attribute here, add it there.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";

  outputs =
    { self, nixpkgs }:
    let
      lib = nixpkgs.lib;
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});

      version = "0.1.0";

      # The apps offered as `nix run .#NAME` (`coring --apps NAME`). Which of
      # them need PostgreSQL the binary says when they run (coring --list-apps).
      appNames = [
        "hello"
        "todo"
        "users"
        "cep"
        "embed"
      ];

      # What the library and the server are built from and with.
      coringInputs = pkgs: {
        nativeBuildInputs = [
          pkgs.cmake
          pkgs.pkg-config
          pkgs.python3 # apps/openapi/embed.py, cmake/public_symbols.py
        ];
        buildInputs = [
          pkgs.liburing
          pkgs.systemd # libsystemd: sd_listen_fds, sd_notify (socket activation, Type=notify)
          pkgs.simdjson
          pkgs.double-conversion # shortest round-trip floats (core/src/float_format.cpp)
          pkgs.libpq # PostgreSQL's client library (users, cep)
          pkgs.curl # libcurl (cep)
          pkgs.zstd # response compression (http/src/compress.c)
          pkgs.brotli
          pkgs.libdeflate
          pkgs.openblas # embed
          pkgs.utf8proc # embed
        ];
      };

      # coring, built with CMake from this repository, tests included.
      # framePointers: the build perf/flame profiles (RelWithDebInfo, frame
      # pointers, unstripped; its tests are not run again).
      mkCoring =
        pkgs:
        { framePointers }:
        pkgs.stdenv.mkDerivation {
          pname = if framePointers then "coring-frame-pointers" else "coring";
          inherit version;
          src = self;

          # stdenv's compiler is gcc with g++: the project enables C++ (CXX) for
          # the simdjson wrapper. No boost: coring has its own context switch.
          inherit (coringInputs pkgs) nativeBuildInputs;
          buildInputs = (coringInputs pkgs).buildInputs ++ [
            pkgs.criterion # unit tests
          ];
          # python3: the integration tests; postgresql: the server they use.
          nativeCheckInputs = [
            pkgs.python3
            pkgs.postgresql
          ];

          # The integration tests are scripts with a #!/usr/bin/python3 line.
          postPatch = ''
            patchShebangs tests
          '';

          cmakeFlags = [
            "-DCORING_TESTS=${if framePointers then "OFF" else "ON"}"
            "-DCORING_WERROR=OFF"
            "-DCORING_FRAME_POINTERS=${if framePointers then "ON" else "OFF"}"
          ];
          cmakeBuildType = if framePointers then "RelWithDebInfo" else "Release";
          dontStrip = framePointers;

          # ctest, unit and integration tests, with a throw-away PostgreSQL on
          # a Unix socket in the build directory. Where PostgreSQL cannot start
          # (initdb refuses to run as root, e.g. a single-user Nix without
          # sandbox), the integration tests are skipped, and the log says so.
          # The `nix` label (tests/nix: the flake's own structural check) needs
          # nix, which the sandbox does not have.
          doCheck = !framePointers;
          checkPhase = ''
            runHook preCheck
            exclude='^nix$'
            pgroot=$(mktemp -d "$TMPDIR/pg.XXXXXX")
            if initdb -D "$pgroot/data" -U coring --auth=trust --encoding=UTF8 --no-locale \
                 >"$pgroot/initdb.log" 2>&1 \
               && pg_ctl -D "$pgroot/data" -l "$pgroot/postgres.log" -w \
                    -o "-c listen_addresses=''' -k '$pgroot'" start >/dev/null \
               && createdb -h "$pgroot" -U coring coring; then
              export DATABASE_URL="postgresql:///coring?host=$pgroot&user=coring"
              export PGHOST="$pgroot" PGUSER=coring PGDATABASE=coring
              echo "coring check: PostgreSQL started for the integration tests (socket in $pgroot)"
            else
              cat "$pgroot"/*.log >&2 || true
              echo "coring check: PostgreSQL could not start in the build sandbox:" \
                   "SKIPPING the integration tests (ctest label 'integration')." \
                   "Only the unit tests run." >&2
              exclude='^(nix|integration)$'
            fi
            status=0
            ctest --output-on-failure -LE "$exclude" || status=$?
            pg_ctl -D "$pgroot/data" -m fast -w stop >/dev/null 2>&1 || true
            [ "$status" -eq 0 ]
            runHook postCheck
          '';

          # The server: the binary (linked with libcoring.a) and coring(1);
          # the library is packages.libcoring.
          installPhase = ''
            runHook preInstall
            cmake --install . --component server
            rm -rf "$out/lib/systemd" "$out/etc"
            runHook postInstall
          '';

          meta = {
            description = "C17 HTTP/1.1 server runtime on io_uring, one ring per core";
            mainProgram = "coring";
            platforms = lib.platforms.linux;
          };
        };

      # libcoring for a service built on it (docs/library.md): out holds
      # libcoring.so.0; dev the headers, libcoring.a, coring.pc and the CMake
      # package (find_package(coring)), whose paths name out's library.
      mkLibcoring =
        pkgs:
        pkgs.stdenv.mkDerivation {
          pname = "libcoring";
          inherit version;
          src = self;
          outputs = [
            "out"
            "dev"
          ];
          inherit (coringInputs pkgs) nativeBuildInputs buildInputs;
          cmakeFlags = [
            "-DCORING_TESTS=OFF"
            "-DCORING_WERROR=OFF"
          ];
          cmakeBuildType = "Release";
          # The library's install components (cmake/library.cmake); the
          # multiple-outputs hook sends include/, lib/pkgconfig and lib/cmake
          # to dev.
          installPhase = ''
            runHook preInstall
            cmake --install . --component runtime
            cmake --install . --component development
            runHook postInstall
          '';
          meta = {
            description = "coring's runtime as a library: a ring per core, coroutines, HTTP/1.1, pipelined PostgreSQL";
            platforms = lib.platforms.linux;
          };
        };

      # `coring ARGS...`, with PostgreSQL when an app it mounts needs one
      # (coring --list-apps says, with the same arguments) and DATABASE_URL is
      # unset: initdb into a mktemp folder, start postgres on a Unix socket
      # there (no TCP), export DATABASE_URL, run coring, and stop postgres and
      # remove the folder on exit, as apps/run does. coring runs as a child so that the trap
      # runs; SIGINT/SIGTERM/SIGHUP to this script are passed on as SIGTERM
      # (a background child ignores SIGINT).
      mkServe =
        pkgs: coring:
        {
          name,
          args,
        }:
        pkgs.writeShellApplication {
          inherit name;
          runtimeInputs = [
            coring
            pkgs.coreutils
            pkgs.gawk
            pkgs.postgresql
          ];
          text = ''
            args=(${lib.escapeShellArgs args} "$@")
            # Does an app mounted with these arguments need PostgreSQL?
            if [ -n "''${DATABASE_URL:-}" ] ||
               ! coring --list-apps "''${args[@]}" 2>/dev/null |
                 awk '$2 == "mounted" && $3 == "database" {f = 1} END {exit !f}'; then
              exec coring "''${args[@]}"
            fi
            if [ "$(id -u)" -eq 0 ]; then
              echo "${name}: DATABASE_URL is unset and PostgreSQL's initdb refuses to run as root:" \
                   "run as a normal user, or set DATABASE_URL" >&2
              exit 1
            fi
            pgroot=$(mktemp -d "''${TMPDIR:-/tmp}/coring-pg.XXXXXX")
            trap 'pg_ctl -D "$pgroot/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$pgroot"' EXIT
            echo "${name}: DATABASE_URL is unset: starting a throw-away PostgreSQL in $pgroot" >&2
            if ! initdb -D "$pgroot/data" -U coring --auth=trust --encoding=UTF8 --no-locale \
                   >"$pgroot/initdb.log" 2>&1; then
              cat "$pgroot/initdb.log" >&2
              exit 1
            fi
            if ! pg_ctl -D "$pgroot/data" -l "$pgroot/postgres.log" -w \
                   -o "-c listen_addresses=''' -k '$pgroot'" start >/dev/null; then
              cat "$pgroot/postgres.log" >&2
              exit 1
            fi
            createdb -h "$pgroot" -U coring coring
            export DATABASE_URL="postgresql:///coring?host=$pgroot&user=coring"

            coring "''${args[@]}" &
            child=$!
            trap 'kill -TERM "$child" 2>/dev/null || true' INT TERM HUP
            status=0
            while :; do
              if wait "$child"; then status=0; else status=$?; fi
              kill -0 "$child" 2>/dev/null || break
            done
            exit "$status"
          '';
        };

      # perf/run and perf/flame compute every path from their own location and
      # write their results beside it (perf/results), so they run from a
      # writable tree: the current directory when it is a coring checkout,
      # else a fresh copy of this flake's source in a temporary folder.
      # CORING_BIN / CORING_BINARY: the Nix-built coring; PERF_PY, NGINX_BIN:
      # the interpreter and the nginx peer from nixpkgs.
      mkPerfTool =
        pkgs: coring:
        {
          name,
          script,
          tools,
        }:
        pkgs.writeShellApplication {
          inherit name;
          runtimeInputs = [
            coring
            pkgs.coreutils
            pkgs.findutils
            pkgs.gawk
            pkgs.gnugrep
            pkgs.gnused
            pkgs.procps
            pkgs.util-linux
            pkgs.python3
            pkgs.wrk
          ]
          ++ tools;
          text = ''
            export CORING_BIN=${lib.getExe coring}
            export CORING_BINARY="$CORING_BIN"
            export PERF_PY=${pkgs.python3}/bin/python3
            export NGINX_BIN=${pkgs.nginx}/bin/nginx
            if [ -f ${script} ] && [ -f flake.nix ] && [ -d perf/lib ]; then
              root=$PWD
            else
              root=$(mktemp -d "''${TMPDIR:-/tmp}/coring-perf.XXXXXX")
              cp -R ${self}/. "$root"
              chmod -R u+w "$root"
              echo "${name}: not in a coring checkout: working in $root (results stay there)" >&2
            fi
            cd "$root"
            exec bash ${script} "$@"
          '';
        };

      app = drv: description: {
        type = "app";
        program = lib.getExe drv;
        meta = { inherit description; };
      };
    in
    {
      packages = forAllSystems (
        system: pkgs:
        let
          coring = mkCoring pkgs { framePointers = false; };
        in
        {
          default = coring;
          inherit coring;
          coring-frame-pointers = mkCoring pkgs { framePointers = true; };
          libcoring = mkLibcoring pkgs;
        }
      );

      apps = forAllSystems (
        system: pkgs:
        let
          coring = self.packages.${system}.coring;
          serve = mkServe pkgs coring;
          perfTool = mkPerfTool pkgs;
          everyApp = app (serve {
            name = "coring-serve";
            args = [ ];
          }) "coring serving every app (a throw-away PostgreSQL when DATABASE_URL is unset)";
          oneApp =
            appName:
            app (serve {
              name = "coring-${appName}";
              args = [
                "--apps"
                appName
              ];
            }) "coring serving only the ${appName} app";
        in
        lib.genAttrs appNames oneApp
        // {
          default = everyApp;
          coring = everyApp;
          bench = app (perfTool coring {
            name = "coring-bench";
            script = "perf/run";
            # the peers perf/run starts: fastify (node, npm) and nginx
            tools = [
              pkgs.nodejs
              pkgs.nginx
              pkgs.curl
            ];
          }) "perf/run: coring and its peers under wrk";
          flame = app (perfTool self.packages.${system}.coring-frame-pointers {
            name = "coring-flame";
            script = "perf/flame";
            tools = [
              pkgs.linuxPackages.perf
              pkgs.flamegraph
              pkgs.inferno
            ];
          }) "perf/flame: a flame graph of coring under a wrk scenario";
        }
      );

      devShells = forAllSystems (
        system: pkgs:
        let
          tools = [
            pkgs.cmake
            pkgs.pkg-config
            pkgs.ninja
            pkgs.liburing
            pkgs.systemd
            pkgs.simdjson
            pkgs.double-conversion
            pkgs.libpq
            pkgs.curl
            pkgs.zstd
            pkgs.brotli
            pkgs.libdeflate
            pkgs.openblas
            pkgs.utf8proc
            pkgs.criterion
            pkgs.postgresql
            pkgs.python3
            pkgs.wrk
            pkgs.nodejs
            pkgs.nginx
            pkgs.linuxPackages.perf
            pkgs.flamegraph
            pkgs.inferno
            pkgs.clang-tools
            pkgs.valgrind
            pkgs.gdb
            pkgs.shellcheck
          ];
          # PERF_PY / NGINX_BIN: perf/run's defaults are Debian paths.
          shellHook = ''
            export PERF_PY=${pkgs.python3}/bin/python3
            export NGINX_BIN=${pkgs.nginx}/bin/nginx
          '';
        in
        {
          # gcc and g++ (stdenv), with everything else.
          default = pkgs.mkShell {
            name = "coring-dev";
            packages = tools;
            inherit shellHook;
          };
          # The same with clang and clang++ as the compilers: `nix develop .#clang`.
          clang = pkgs.mkShell.override { stdenv = pkgs.clangStdenv; } {
            name = "coring-dev-clang";
            packages = tools;
            inherit shellHook;
          };
        }
      );

      # `nix flake check`: builds coring and runs its tests (doCheck, above),
      # and builds the dev shells.
      checks = forAllSystems (
        system: pkgs: {
          coring = self.packages.${system}.coring;
          libcoring = self.packages.${system}.libcoring;
          devShell = self.devShells.${system}.default;
        }
      );
    };
}
