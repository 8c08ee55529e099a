package scaletarget

import (
	"testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestEncodeDecode(t *testing.T) {
	ref := elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	got, ok := Decode(Encode(ref))
	if !ok || got != ref {
		t.Fatalf("Decode(Encode(%+v)) = %+v, %v", ref, got, ok)
	}
	for _, bad := range []string{"", "{", `{"apiVersion":"apps/v1","kind":"Deployment"}`, `{"kind":"Deployment","name":"web"}`} {
		if _, ok := Decode(bad); ok {
			t.Errorf("Decode(%q) reads a reference", bad)
		}
	}
}
