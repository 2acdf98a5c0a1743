# shellcheck shell=bash
# perf/lib/proc.sh: what a server process tree costs, read from /proc.
#
# A "server" is a PID and its descendants (nginx: master + worker). CPU time
# is utime + stime, fields 14 and 15 of /proc/PID/stat, in clock ticks
# (getconf CLK_TCK, 100 on Linux): a process's counters include all of its
# threads (node's GC and libuv threads, coring's workers). Peak RSS is VmHWM
# from /proc/PID/status, in KiB, summed over the tree (pages shared between
# nginx's master and worker are counted twice).

CLK_TCK=$(getconf CLK_TCK)
export CLK_TCK

# proc_tree PID: print PID and its live descendants, one per line.
proc_tree() {
  local pid=$1 task child
  [[ -d /proc/$pid ]] || return 0
  echo "$pid"
  for task in /proc/"$pid"/task/*; do
    [[ -r $task/children ]] || continue
    for child in $(<"$task/children"); do
      proc_tree "$child"
    done
  done
}

# proc_cpu_ticks PID: utime + stime of PID's tree, in clock ticks.
proc_cpu_ticks() {
  local total=0 pid stat rest
  local -a f
  for pid in $(proc_tree "$1"); do
    { stat=$(<"/proc/$pid/stat"); } 2>/dev/null || continue
    rest=${stat##*) }            # comm may hold spaces and ')': cut after the last ')'
    read -r -a f <<<"$rest"     # f[0] is field 3 (state): field N is f[N-3]
    total=$((total + f[11] + f[12]))
  done
  echo "$total"
}

# proc_peak_rss_kb PID: VmHWM of PID's tree, in KiB.
proc_peak_rss_kb() {
  local total=0 pid key value _unit
  for pid in $(proc_tree "$1"); do
    while read -r key value _unit; do
      [[ $key == VmHWM: ]] && total=$((total + value))
    done <"/proc/$pid/status" 2>/dev/null || true
  done
  echo "$total"
}

# proc_count PID: how many processes the tree holds.
proc_count() { proc_tree "$1" | wc -l; }

# ------------------------------------------------------------------ cgroups
# A server's peak memory is read from a cgroup of its own where the machine
# allows one: cgroup v2 memory.peak, or cgroup v1 memory.max_usage_in_bytes
# (the same high-water mark of the cgroup's charged memory: anonymous pages,
# page cache it first touched, kernel memory such as socket buffers). Every
# process of the server is in it, so nginx's or node:cluster's shared pages
# count once. Without one (no write access, v2 without the memory controller
# delegated), peak RSS is VmHWM summed over the tree, as above.
#
# cg_detect: sets CG_BASE (the directory to make per-server cgroups in),
# CG_PEAK_FILE and CG_KIND ("cgroup v2 memory.peak", ...), or leaves CG_BASE
# empty.
CG_BASE="" CG_PEAK_FILE="" CG_KIND=""
cg_detect() {
  local path base peak kind probe
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    path=$(awk -F: '$1 == "0" { print $3; exit }' /proc/self/cgroup)
    base=/sys/fs/cgroup${path%/}
    peak=memory.peak kind="cgroup v2 memory.peak"
  else
    path=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' /proc/self/cgroup)
    [[ -n $path ]] || return 0
    base=/sys/fs/cgroup/memory${path%/}
    peak=memory.max_usage_in_bytes kind="cgroup v1 memory.max_usage_in_bytes"
  fi
  probe=$base/coring-perf-probe-$$
  mkdir "$probe" 2>/dev/null || return 0
  if [[ -r $probe/$peak ]] && (echo "$BASHPID" >"$probe/cgroup.procs") 2>/dev/null; then
    CG_BASE=$base CG_PEAK_FILE=$peak CG_KIND=$kind
  fi
  rmdir "$probe" 2>/dev/null || true
  return 0
}

# cg_new NAME: make a cgroup for one server, print its path (nothing if none).
cg_new() {
  [[ -n $CG_BASE ]] || return 0
  local d=$CG_BASE/coring-perf-$$-$1
  rmdir "$d" 2>/dev/null || true
  mkdir "$d" 2>/dev/null && echo "$d"
  return 0
}

# cg_peak_kb DIR: the cgroup's peak memory in KiB (nothing if unreadable).
cg_peak_kb() {
  local v
  [[ -n $1 && -r $1/$CG_PEAK_FILE ]] || return 0
  v=$(<"$1/$CG_PEAK_FILE")
  echo $((v / 1024))
}

# cg_remove DIR: remove an emptied cgroup (its processes have exited).
cg_remove() {
  local i
  [[ -n $1 && -d $1 ]] || return 0
  for ((i = 0; i < 20; i++)); do
    rmdir "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 0
}
