package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestObserveOnlyReads: observe.go, where a reconcile reads the world, calls
// no method that writes: none of the API clients' writes, no Event, and
// none of the in-memory claims and timers (the port allocator, the target
// watches and the keyed maps), which claim and execute make
// (docs/architecture.md, "One reconcile"). A static check of the file: what
// observe calls in other packages (ledger.Observe, wakeprogress.Observe,
// the fallback's Observe) takes readers, not writers.
func TestObserveOnlyReads(t *testing.T) {
	writes := map[string]bool{
		// client.Writer, client.StatusWriter, the Events recorder.
		"Create": true, "Update": true, "Patch": true, "Delete": true, "DeleteAllOf": true, "Apply": true,
		"Status": true, "SubResource": true, "Eventf": true,
		// ports.Allocator, targets.Watches, keyed.Map, the scale target.
		"Allocate": true, "Release": true, "Ensure": true, "Set": true,
		"Scale": true, "ScaleFromZero": true, "ScaleToZero": true,
		// Reconciler's own writers.
		"writeStatus": true, "recordProxyPorts": true, "claim": true, "execute": true,
	}
	f, err := parser.ParseFile(token.NewFileSet(), "observe.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		calls++
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && writes[sel.Sel.Name] {
			t.Errorf("observe.go calls %s, a write", sel.Sel.Name)
		}
		return true
	})
	if calls < 20 {
		t.Fatalf("found only %d calls in observe.go: the check reads the wrong file", calls)
	}
}
