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
