package cluster

import (
	"slices"
	"testing"
)

func TestSharedRequirementsTakeOursWhereBothHaveTheModule(t *testing.T) {
	theirs := map[string]string{
		"k8s.io/client-go":     "v0.37.1",
		"golang.org/x/time":    "v0.16.0",
		"github.com/miekg/dns": "v1.1.70",
		"golang.org/x/net":     "v0.62.0",
	}
	ours := map[string]string{
		"k8s.io/client-go":               "v0.37.2",
		"golang.org/x/time":              "v0.15.0",
		"golang.org/x/net":               "v0.62.0",
		"sigs.k8s.io/controller-runtime": "v0.23.0",
	}
	got := sharedRequirements(theirs, ours)
	// x/time: ours is older; requiring it is harmless (minimal version
	// selection keeps CoreDNS's newer one). Equal versions and modules only
	// one side has are left out.
	want := []string{"golang.org/x/time@v0.15.0", "k8s.io/client-go@v0.37.2"}
	if !slices.Equal(got, want) {
		t.Fatalf("sharedRequirements = %v, want %v", got, want)
	}
}
