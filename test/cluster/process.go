package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// componentEnv is the whole environment a component gets: no proxy settings,
// no KUBECONFIG, nothing from the caller's shell.
var componentEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
}

func (c Config) pidFile(name string) string { return filepath.Join(c.runDir(), name+".pid") }

// spawn starts comp inside the node's namespace as a daemon of its own
// session, logging to logs/<name>.log, records its PID and start time, and
// moves it into the components cgroup.
func (c Config) spawn(comp component) error {
	logf, err := os.OpenFile(c.LogFile(comp.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s: %s %s\n", time.Now().Format(time.RFC3339), comp.bin, shellQuote(comp.args))
	args := append([]string{"--net=" + c.NetNSPath(), "--", comp.bin}, comp.args...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append(slices.Clip(componentEnv), comp.env...)
	cmd.Dir = c.StateDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", comp.name, err)
	}
	pid := cmd.Process.Pid
	start, err := procStartTime(pid)
	if err != nil {
		return fmt.Errorf("start %s: %w", comp.name, err)
	}
	if err := os.WriteFile(c.pidFile(comp.name), []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644); err != nil {
		return err
	}
	if err := c.joinComponentsCgroup(pid); err != nil {
		return err
	}
	// The daemon outlives this process; PID 1 reaps it in the end.
	return cmd.Process.Release()
}

// procStat returns the fields of /proc/<pid>/stat after the command name:
// the state first (field 3).
func procStat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return fields, nil
}

// procStartTime is field 22 of /proc/<pid>/stat: with the PID it names one
// process, even after the PID is reused.
func procStartTime(pid int) (uint64, error) {
	fields, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if fields[0] == "Z" {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// isZombie reports whether pid has exited and waits for its parent to reap
// it.
func isZombie(pid int) bool {
	fields, err := procStat(pid)
	return err == nil && fields[0] == "Z"
}

// runningPID returns the recorded PID of component name if that very process
// is still alive.
func (c Config) runningPID(name string) (int, bool) {
	data, err := os.ReadFile(c.pidFile(name))
	if err != nil {
		return 0, false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &pid, &start); err != nil {
		return 0, false
	}
	got, err := procStartTime(pid)
	return pid, err == nil && got == start
}

// stop sends SIGTERM to component name, waits up to grace, then SIGKILLs it.
func (c Config) stop(name string, grace time.Duration) error {
	pid, ok := c.runningPID(name)
	if !ok {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if _, ok := c.runningPID(name); !ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50; i++ {
		if _, ok := c.runningPID(name); !ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("process " + strconv.Itoa(pid) + " (" + name + ") survived SIGKILL")
}
