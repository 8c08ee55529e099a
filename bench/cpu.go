//go:build bench

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU use, read from /proc and the cgroup filesystem on this machine, to
// tell whether a throughput run was bound by the resolver's own CPU, by its
// CPU limit, or by the machine.

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on Linux.
const userHZ = 100

// processCPU is the CPU time all of a process' threads have used.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis, where field 3 (state) is the first.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, field := range f[11:13] { // utime (14) and stime (15)
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// machineCPU is the busy and the total CPU time of the whole machine since
// boot (/proc/stat's first line; idle and iowait are not busy).
func machineCPU() (busy, total time.Duration, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no cpu line")
	}
	var sum, idle int64
	for i, field := range f[1:] {
		if i >= 8 { // guest times are already in user and nice
			break
		}
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	tick := time.Second / userHZ
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick, nil
}

// throttled is a process' cgroup CFS figures: the enforcement periods that
// have passed and those in which it was throttled. It reads cgroup v2's
// unified cpu.stat or cgroup v1's cpu controller.
func throttled(pid int) (periods, throttledPeriods int64, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return 0, 0, err
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[2]))
		case hasController(parts[1], "cpu"):
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[1], parts[2]), filepath.Join("/sys/fs/cgroup/cpu", parts[2]))
		}
	}
	for _, dir := range dirs {
		stat, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			continue
		}
		found := 0
		for _, line := range strings.Split(string(stat), "\n") {
			k, v, _ := strings.Cut(line, " ")
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "nr_periods":
				periods, found = n, found+1
			case "nr_throttled":
				throttledPeriods, found = n, found+1
			}
		}
		if found == 2 {
			return periods, throttledPeriods, nil
		}
	}
	return 0, 0, fmt.Errorf("no cpu.stat with CFS periods for process %d (looked in %s)", pid, strings.Join(dirs, ", "))
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// cpuSample is one reading of a process' and the machine's CPU figures.
type cpuSample struct {
	proc                    time.Duration
	busy, total             time.Duration
	periods, throttledCount int64
	throttleErr             error
}

func sampleCPU(pid int) (cpuSample, error) {
	var s cpuSample
	var err error
	if s.proc, err = processCPU(pid); err != nil {
		return s, err
	}
	if s.busy, s.total, err = machineCPU(); err != nil {
		return s, err
	}
	s.periods, s.throttledCount, s.throttleErr = throttled(pid)
	return s, nil
}

// cpuUse is what happened between two samples.
type cpuUse struct {
	// procCPUs is the process' CPU time over the wall time: CPUs used.
	procCPUs float64
	// machineBusy is the machine's busy share, 0 to 1.
	machineBusy float64
	// throttledShare is the share of CFS periods in which the process was
	// throttled, -1 when unknown.
	throttledShare float64
	proc           time.Duration
}

func (a cpuSample) to(b cpuSample, wall time.Duration) cpuUse {
	u := cpuUse{proc: b.proc - a.proc, throttledShare: -1}
	if wall > 0 {
		u.procCPUs = float64(b.proc-a.proc) / float64(wall)
	}
	if t := b.total - a.total; t > 0 {
		u.machineBusy = float64(b.busy-a.busy) / float64(t)
	}
	if a.throttleErr == nil && b.throttleErr == nil && b.periods > a.periods {
		u.throttledShare = float64(b.throttledCount-a.throttledCount) / float64(b.periods-a.periods)
	}
	return u
}

// runQueue is how long a process' threads have waited on the kernel's run
// queues for a CPU, and how many times they were then given one
// (/proc/PID/task/*/schedstat: the second and third fields). Go's own
// /sched/latencies cannot see this wait: it ends when a goroutine is given
// a thread, whether or not the kernel then runs that thread.
type runQueue struct {
	wait   time.Duration
	slices int64
	ok     bool
}

func readRunQueue(pid int) runQueue {
	files, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil || len(files) == 0 {
		return runQueue{}
	}
	var q runQueue
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fields := strings.Fields(string(data))
		if len(fields) < 3 {
			return runQueue{}
		}
		wait, err1 := strconv.ParseInt(fields[1], 10, 64)
		slices, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			return runQueue{}
		}
		q.wait += time.Duration(wait)
		q.slices += slices
	}
	q.ok = true
	return q
}

// waitedPerSecond is the run-queue wait between q and later in milliseconds
// per second of wall time, and the mean wait each time the threads were
// given a CPU, in milliseconds. Threads that exited in between take their
// counts with them, so a negative difference reads as unknown.
func (q runQueue) waitedPerSecond(later runQueue, wall time.Duration) (perSecond, perSlice float64, ok bool) {
	dw, ds := later.wait-q.wait, later.slices-q.slices
	if !q.ok || !later.ok || wall <= 0 || dw < 0 || ds <= 0 {
		return 0, 0, false
	}
	return float64(dw.Microseconds()) / 1000 / wall.Seconds(), float64(dw.Microseconds()) / 1000 / float64(ds), true
}
