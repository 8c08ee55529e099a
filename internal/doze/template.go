package doze

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// TemplateHash is a short hash of a pod template, for status.doze's
// templateHash: a doze that finds another hash than the one it began with
// knows the template changed (a rollout), and wakes the target. It is
// only ever compared with another TemplateHash of a template read the
// same way, so how it is computed may change between versions at the cost
// of one spurious wake.
func TemplateHash(t *corev1.PodTemplateSpec) string {
	if t == nil {
		return ""
	}
	data, err := json.Marshal(t)
	if err != nil {
		return ""
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}
