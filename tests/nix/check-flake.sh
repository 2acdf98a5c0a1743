#!/usr/bin/env bash
# tests/nix/check-flake.sh [SOURCE_DIR]: the structural check of flake.nix.
#
# nixpkgs cannot be fetched here (no network), so the flake is evaluated, not
# built, against tests/nix/stub-nixpkgs (--override-input nixpkgs), which
# provides exactly the nixpkgs attributes the flake uses:
#   1. nix-instantiate --parse: flake.nix and the stub parse;
#   2. nix flake show: every output is there (packages, apps, dev shells, checks);
#   3. nix flake check --no-build;
#   4. nix eval: every package, dev shell and check's drvPath, on both
#      systems, and every app (type "app", program a store path's bin/NAME);
#      nix 2.8's flake check does not look into apps; libcoring's outputs
#      (out, and dev: the headers and the package files);
#   5. every app's script, as writeShellApplication writes it: bash -n, and
#      when it is installed, shellcheck;
#   6. the stub is strict: copies of flake.nix with one misspelt attribute or
#      argument each must FAIL evaluation, naming it.
# Flakes see only files git tracks, so the check works on a copy of the
# source tree (tracked files and untracked, not ignored ones) in a fresh git
# repository, with a private Nix store under the same temporary folder: no
# daemon, no root, no network, nothing written outside that folder.
#
# Exit status: 0 passed, 1 failed, 77 skipped (nix or git missing; ctest's
# SKIP_RETURN_CODE). Debian: apt-get install nix-bin (nix 2.8 or later).
set -euo pipefail

src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
src=$(cd "$src" && pwd)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

command -v nix >/dev/null 2>&1 || skip "nix is not installed (Debian: apt-get install nix-bin): flake.nix not checked"
command -v nix-instantiate >/dev/null 2>&1 || skip "nix-instantiate is not installed: flake.nix not checked"
command -v git >/dev/null 2>&1 || skip "git is not installed (flakes need it): flake.nix not checked"

nix_version=$(nix --version | sed -n 's/^nix (Nix) \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p')
read -r nix_major nix_minor <<<"${nix_version:-0 0}"
if (( nix_major < 2 || (nix_major == 2 && nix_minor < 8) )); then
  skip "nix $(nix --version) is older than 2.8: flake.nix not checked"
fi

[[ -f $src/flake.nix ]] || fail "no flake.nix in $src"
[[ -f $src/tests/nix/stub-nixpkgs/flake.nix ]] || fail "no tests/nix/stub-nixpkgs/flake.nix in $src"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/coring-nix-check.XXXXXX")
cleanup() {
  chmod -R u+w "$tmp" 2>/dev/null || true   # the store's files are read-only
  rm -rf "$tmp"
}
trap cleanup EXIT

export XDG_CACHE_HOME=$tmp/cache  # nix's fetcher and eval caches
export NO_COLOR=1
store=$tmp/store
nix_global=(
  --extra-experimental-features 'nix-command flakes'
  --store "$store"
  --option build-users-group ''
  --offline
)
run_nix() { timeout 60 nix "${nix_global[@]}" "$@"; }

# Copy the source tree into a fresh git repository.
copy_tree() {  # copy_tree DEST
  local dest=$1
  mkdir -p "$dest"
  if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$src" ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do
        [[ -e $src/$f || -L $src/$f ]] && printf '%s\0' "$f"
      done |
      tar -C "$src" --null -T - -cf - | tar -C "$dest" -xf -
  else
    tar -C "$src" --exclude=./.git --exclude='./build*' --exclude=node_modules \
      --exclude=./perf/results -cf - . | tar -C "$dest" -xf -
  fi
  git -C "$dest" init -q
  git -C "$dest" add -A
}

repo=$tmp/repo
stub=path:$repo/tests/nix/stub-nixpkgs
flake_args=(--no-write-lock-file --override-input nixpkgs "$stub")
systems=(aarch64-linux x86_64-linux)

# The evaluation steps (3 and 4) of a flake copy. Prints nix's messages.
eval_outputs() {  # eval_outputs DIR
  local dir=$1 coll got want sys name
  run_nix flake check --no-build "${flake_args[@]}" "$dir" 2>&1 || return 1
  # Every derivation, both systems: "system/name ...", sorted.
  # shellcheck disable=SC2016 # a Nix expression: ${...} is Nix's
  local drvs='set: builtins.concatStringsSep " " (builtins.concatMap (sys:
      map (n: let d = set.${sys}.${n}; in
        if (d.type or null) == "derivation" && builtins.isString d.drvPath
        then "${sys}/${n}" else throw "${sys}.${n} is not a derivation")
      (builtins.attrNames set.${sys})) (builtins.attrNames set))'
  for coll in packages devShells checks; do
    got=$(run_nix eval --raw "${flake_args[@]}" "$dir#$coll" --apply "$drvs" 2>"$tmp/err") ||
      { cat "$tmp/err"; return 1; }
    case $coll in
      packages) want=(coring coring-frame-pointers default libcoring) ;;
      devShells) want=(clang default) ;;
      checks) want=(coring devShell libcoring) ;;
    esac
    local expect=()
    for sys in "${systems[@]}"; do for name in "${want[@]}"; do expect+=("$sys/$name"); done; done
    [[ $got == "${expect[*]}" ]] || { echo "$coll: got '$got', want '${expect[*]}'"; return 1; }
  done
  # Every app: type "app", program /nix/store/HASH-NAME/bin/PROGRAM whose
  # derivation evaluates (it is in the string's context).
  # shellcheck disable=SC2016 # a Nix expression
  local apps='apps: builtins.concatStringsSep " " (builtins.concatMap (sys:
      map (n: let a = apps.${sys}.${n}; p = a.program; in
        if a.type == "app"
           && builtins.match "/nix/store/[0-9a-z]{32}-[^/]+/bin/[^/]+" p != null
           && builtins.getContext p != { }
        then "${sys}/${n}" else throw "app ${sys}.${n}: type ${a.type}, program ${p}")
      (builtins.attrNames apps.${sys})) (builtins.attrNames apps))'
  got=$(run_nix eval --raw "${flake_args[@]}" "$dir#apps" --apply "$apps" 2>"$tmp/err") ||
    { cat "$tmp/err"; return 1; }
  local expect=()
  for sys in "${systems[@]}"; do
    for name in bench cep coring default embed flame hello todo users; do expect+=("$sys/$name"); done
  done
  [[ $got == "${expect[*]}" ]] || { echo "apps: got '$got', want '${expect[*]}'"; return 1; }
  # The library has its dev output (headers, coring.pc, the CMake package),
  # a derivation output of its own, on both systems.
  for sys in "${systems[@]}"; do
    # shellcheck disable=SC2016 # a Nix expression
    got=$(run_nix eval --raw "${flake_args[@]}" "$dir#packages.$sys.libcoring" \
            --apply 'p: builtins.concatStringsSep " " p.outputs + " " +
                        (if builtins.isString p.dev.drvPath && p.dev.outputName == "dev"
                         then "dev-ok" else "dev-bad")' 2>"$tmp/err") ||
      { cat "$tmp/err"; return 1; }
    [[ $got == "out dev dev-ok" ]] || { echo "libcoring on $sys: outputs '$got'"; return 1; }
  done
}

step "1. nix-instantiate --parse"
for f in flake.nix tests/nix/stub-nixpkgs/flake.nix; do
  nix-instantiate --store "$store" --parse "$src/$f" >/dev/null || fail "$f does not parse"
  echo "ok: $f parses"
done

copy_tree "$repo"

step "2. nix flake show (nixpkgs: the stub)"
show=$(run_nix flake show "${flake_args[@]}" "$repo" 2>"$tmp/err") || { cat "$tmp/err"; fail "nix flake show"; }
# shellcheck disable=SC2001 # a regular expression
show=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$show")  # colours off
echo "$show"
for want in "package 'coring-0.1.0'" "package 'coring-frame-pointers-0.1.0'" "package 'libcoring-0.1.0'" \
            "development environment 'coring-dev'" "development environment 'coring-dev-clang'"; do
  grep -qF "$want" <<<"$show" || fail "nix flake show lacks $want"
done
for name in default coring hello todo users cep embed bench flame; do
  grep -qE "[^A-Za-z0-9_-]$name: app\$" <<<"$show" || fail "nix flake show lacks app $name"
done

step "3-4. nix flake check --no-build; every output evaluated on ${systems[*]}"
out=$(eval_outputs "$repo") || { echo "$out"; fail "flake.nix does not evaluate against the stub"; }
echo "ok: packages, devShells, checks: every drvPath; apps: every program"

have_shellcheck=$(command -v shellcheck || true)
lint="bash -n, shellcheck"
[[ -n $have_shellcheck ]] || lint="bash -n; shellcheck not installed"
step "5. the apps' scripts: $lint"
for name in coring hello users bench flame; do
  drv=$(run_nix eval --raw "${flake_args[@]}" "$repo#apps.x86_64-linux.$name.program" \
          --apply 'p: builtins.head (builtins.attrNames (builtins.getContext p))' 2>/dev/null) ||
    fail "app $name: no derivation"
  # `nix derivation show` since nix 2.15, `nix show-derivation` before.
  run_nix derivation show "$drv" >"$tmp/$name.json" 2>/dev/null ||
    run_nix show-derivation "$drv" >"$tmp/$name.json" 2>/dev/null ||
    fail "app $name: nix derivation show $drv"
  run_nix eval --raw --impure --expr "let j = builtins.fromJSON (builtins.readFile \"$tmp/$name.json\");
      in (builtins.head (builtins.attrValues (j.derivations or j))).env.text" \
    >"$tmp/$name.sh" 2>/dev/null || fail "app $name: no script text in $drv"
  bash -n "$tmp/$name.sh" || fail "app $name: its script is not valid bash (see above)"
  if [[ -n $have_shellcheck ]]; then
    shellcheck -s bash "$tmp/$name.sh" || fail "app $name: shellcheck (see above)"
  fi
  echo "ok: app $name's script ($lint)"
done

step "6. the stub is strict: misspelt copies of flake.nix must fail"
# FROM|TO|WORD: a literal in flake.nix, what replaces it (everywhere), and
# the word the evaluation error must name.
mutations=(
  'pkgs.utf8proc|pkgs.utf8procc|utf8procc'                    # a library coring links
  'pkgs.linuxPackages.perf|pkgs.linuxPackages.perff|perff'    # a nested package attribute
  'pkgs.inferno|pkgs.infernoo|infernoo'                       # the flame app, the dev shell
  'lib.getExe drv|lib.getExee drv|getExee'                    # a lib function, in the apps only
  'runtimeInputs = [|runtimeInput = [|runtimeInput'           # not an argument of writeShellApplication
  'cmakeFlags = [|cmakeFlag = [|cmakeFlag'                    # not an attribute of mkDerivation
  'pkgs.mkShell.override|pkgs.mkShelll.override|mkShelll'     # the dev shell builder
  'outputs = [|output = [|output'                             # the library's outputs
)
i=0
for m in "${mutations[@]}"; do
  IFS='|' read -r from to word <<<"$m"
  i=$((i + 1))
  mut=$tmp/mut$i
  cp -a "$repo" "$mut"
  grep -qF -- "$from" "$mut/flake.nix" || fail "mutation $i: '$from' is not in flake.nix (update this list)"
  text=$(<"$mut/flake.nix")
  printf '%s\n' "${text//"$from"/"$to"}" >"$mut/flake.nix"
  git -C "$mut" add -A
  if out=$(eval_outputs "$mut"); then
    fail "mutation $i ('$from' -> '$to') still evaluates: the stub is not strict"
  fi
  grep -qF -- "'$word'" <<<"$out" || { echo "$out"; fail "mutation $i failed, but not naming '$word'"; }
  [[ -n ${VERBOSE:-} ]] && grep -m1 '^error' <<<"$out"
  echo "ok: '$from' -> '$to' fails, naming '$word'"
  chmod -R u+w "$mut" && rm -rf "$mut"
done

echo "PASS: flake.nix is structurally sound against the stub nixpkgs (not built: no network)"
