package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAnnotationPatch(t *testing.T) {
	on := "true"
	cases := []struct {
		name  string
		value *string
		want  string
	}{
		{name: "set", value: &on, want: `{"metadata":{"annotations":{"elasti.dev/keep-awake":"true"}}}`},
		{name: "remove", value: nil, want: `{"metadata":{"annotations":{"elasti.dev/keep-awake":null}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := annotationPatch("elasti.dev/keep-awake", tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}
