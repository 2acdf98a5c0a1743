# shellcheck shell=bash
# perf/peers/go.sh: what the Go peers share. Sourced by their `peer` scripts.
# They build offline with Debian's Go (golang-go) in GOPATH mode against the
# packages Debian installs under /usr/share/gocode (GO111MODULE=off): no
# module proxy. The binary goes to <peer>/target/server (git-ignored).

go_env() {
  export GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS=-trimpath
  export GOCACHE=$1/target/gocache
}

# go_setup DIR: build DIR/*.go into DIR/target/server when a source is newer.
go_setup() {
  local dir=$1 f stale=0
  command -v go >/dev/null || { echo "not installed: go (apt-get install golang-go)" >&2; return 1; }
  go_env "$dir"
  [[ -x $dir/target/server ]] || stale=1
  for f in "$dir"/*.go; do [[ $f -nt $dir/target/server ]] && stale=1; done
  ((stale)) || return 0
  mkdir -p "$dir/target"
  (cd "$dir" && go build -o target/server .)
}

go_version() { go version | awk '{ print $3 }'; }

go_size() { echo "$(stat -c %s "$1/target/server") static Go binary"; }

# fasthttp_version: the Debian package's version of fasthttp.
fasthttp_version() {
  dpkg-query -W -f='${Version}' golang-github-valyala-fasthttp-dev 2>/dev/null | sed 's/^[0-9]*://; s/-[^-]*$//' || echo unknown
}
