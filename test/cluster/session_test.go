package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// An earlier cluster killed mid-run leaves its state directory behind. With
// the hygiene check on, the session takes that down before its snapshot, so
// the check compares against a machine without it.
func TestSessionRemovesLeftoversBeforeTheHygieneSnapshot(t *testing.T) {
	state := filepath.Join(t.TempDir(), "elasti-cluster")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		StateDir:   state,
		NetNS:      "elasti-session-test-absent",
		CgroupRoot: "elasti-session-test-absent",
		GuardTable: "elasti_session_test_absent",
	}
	var verbs []string
	s := Session{
		Config:     cfg,
		CheckClean: true,
		CLI: func(verb string) error {
			verbs = append(verbs, verb)
			switch verb {
			case "down":
				return os.RemoveAll(state)
			case "up":
				return errors.New("up stops here: the test is about what comes before it")
			}
			return nil
		},
	}
	err := s.Run(func(bool) error { t.Error("work ran although up failed"); return nil })
	if err == nil {
		t.Fatal("Run returned nil although up failed")
	}
	if want := []string{"down", "up", "down"}; !slices.Equal(verbs, want) {
		t.Errorf("verbs = %v, want %v (leftovers taken down before the snapshot and up)", verbs, want)
	}
}
