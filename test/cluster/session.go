package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// TeardownEnv is set to "1" in the environment of a Session's work when the
// session takes the cluster down afterwards, so the work can skip cleaning
// up objects that go with the cluster anyway.
const TeardownEnv = "ELASTI_CLUSTER_TEARDOWN"

// Session is the one rule for running work on the local cluster, shared by
// `make test-e2e`, `make bench` and e2e.Main: reuse a cluster that already
// runs and leave it running; otherwise bring one up for the work and take it
// down afterwards, unless Keep says to leave it.
type Session struct {
	Config Config
	// CLI runs one verb of elasti-cluster (up, down, images) in a process of
	// its own, so the cluster's daemons are never children of the process
	// that runs the work.
	CLI func(verb string) error
	// Keep leaves a cluster this session brought up running.
	Keep bool
	// Images builds the images and imports them before the work.
	Images bool
	// CheckClean compares the machine after the teardown with a snapshot
	// taken before the cluster came up: the hygiene check.
	CheckClean bool
	// Logf reports what the session does; nil is quiet.
	Logf func(format string, args ...any)
}

// Run runs work on the cluster. teardown tells work whether the session
// takes the cluster down afterwards. The error joins work's error with any
// failure of the session itself (up, images, down, the hygiene check).
func (s Session) Run(work func(teardown bool) error) error {
	logf := s.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	started := !s.Config.Running()
	var before *Snapshot
	if started {
		if s.CheckClean && s.Config.hasLeftovers() {
			// An earlier cluster that was killed rather than taken down
			// (a session cut off, a machine stopped mid-run) left its
			// state behind. Up would remove it after the snapshot, and the
			// hygiene check would then blame this run for what it cleaned.
			logf("an earlier cluster left state behind; taking it down before the hygiene snapshot")
			if err := s.CLI("down"); err != nil {
				return fmt.Errorf("remove an earlier cluster's leftovers: %w", err)
			}
		}
		if s.CheckClean {
			// The killed processes of a cluster taken down just before
			// (by hand, or by a run without the check) linger as zombies
			// until PID 1 reaps them; in the snapshot they would read as
			// this run's doing.
			if left := s.Config.waitClusterZombiesReaped(90 * time.Second); len(left) > 0 {
				logf("killed processes of an earlier cluster are still unreaped after 90 s: %v", left)
			}
			var err error
			if before, err = s.Config.TakeSnapshot(); err != nil {
				return fmt.Errorf("snapshot the machine before cluster up: %w", err)
			}
		}
		if err := s.CLI("up"); err != nil {
			return errors.Join(fmt.Errorf("cluster up: %w", err), s.CLI("down"))
		}
	} else {
		logf("reusing the running cluster; it stays up")
		if have := len(s.Config.NodeNames()); s.Config.Nodes > have {
			logf("it has %d node(s) and this run needs %d: adding the others (they stay too)", have, s.Config.Nodes)
		}
		// Up on a running cluster adds the nodes this run needs and starts
		// the optional components built since the cluster came up.
		if err := s.CLI("up"); err != nil {
			return fmt.Errorf("complete the running cluster: %w", err)
		}
	}
	teardown := started && !s.Keep

	var workErr error
	if s.Images {
		workErr = s.CLI("images")
	}
	if workErr == nil {
		workErr = work(teardown)
	}

	switch {
	case !started:
		return workErr
	case s.Keep:
		logf("the cluster this run started stays up; KUBECONFIG=%s; `make cluster-down` removes it", s.Config.Kubeconfig())
		return workErr
	}
	if err := s.CLI("down"); err != nil {
		return errors.Join(workErr, fmt.Errorf("cluster down: %w", err))
	}
	if before != nil {
		if diff := s.waitClean(before); len(diff) > 0 {
			return errors.Join(workErr, &UncleanError{Diff: diff})
		}
		logf("cluster-down hygiene: no process, link, address, route, netns, nftables/iptables rule, mount, cgroup, sysctl or path left behind")
	}
	return workErr
}

// waitClusterZombiesReaped polls until no cluster process is a zombie, or
// timeout passes, and returns the zombies left.
func (c Config) waitClusterZombiesReaped(timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		var zombies []string
		for _, p := range c.clusterProcessList() {
			if isZombie(p.pid) {
				zombies = append(zombies, fmt.Sprintf("%s (%d)", p.name, p.pid))
			}
		}
		if len(zombies) == 0 || time.Now().After(deadline) {
			return zombies
		}
		time.Sleep(time.Second)
	}
}

// UncleanError is the hygiene check's failure: what differs on the machine
// after the teardown from before the cluster came up.
type UncleanError struct{ Diff []string }

func (e *UncleanError) Error() string {
	msg := "cluster-down hygiene: the machine differs from before cluster-up:"
	for _, l := range e.Diff {
		msg += "\n    " + l
	}
	return msg
}

// waitClean polls until the machine matches before, for a while: killed
// processes wait for PID 1 to reap them. It returns the last difference.
func (s Session) waitClean(before *Snapshot) []string {
	deadline := time.Now().Add(90 * time.Second)
	for {
		after, err := s.Config.TakeSnapshot()
		if err != nil {
			return []string{"snapshot the machine: " + err.Error()}
		}
		diff := before.Diff(after)
		if len(diff) == 0 || time.Now().After(deadline) {
			return diff
		}
		time.Sleep(2 * time.Second)
	}
}

// CLIRunner returns a Session.CLI that runs the elasti-cluster binary at
// path with --k8s-bin-dir, in the repository root, with the caller's output.
// A verb may carry arguments after spaces ("node-stop elasti-node-2").
func (c Config) CLIRunner(path string) func(verb string) error {
	return func(verb string) error {
		words := strings.Fields(verb)
		if len(words) == 0 {
			return errors.New("no verb")
		}
		cmd := exec.Command(path, append([]string{words[0], "--k8s-bin-dir", c.BinDir}, words[1:]...)...)
		cmd.Dir = c.RepoRoot
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
}
