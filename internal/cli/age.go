package cli

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// none is what a column shows when it has no value.
const none = "-"

// age is how long ago t was, written as kubectl writes its AGE column (45s,
// 5m30s, 3h, 2d); "-" when t is unset.
func age(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
