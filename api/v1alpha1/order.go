package v1alpha1

// Precedes reports whether es came before other: created earlier, or at the
// same time and first by namespace, then name. When two ElastiServices
// claim the same resolver port, Service or scale target, the one that
// precedes keeps it; the order depends on the objects alone, so every
// replica of the operator and every reconcile agree on it.
func (es *ElastiService) Precedes(other *ElastiService) bool {
	a, b := es.CreationTimestamp.Time, other.CreationTimestamp.Time
	if !a.Equal(b) {
		return a.Before(b)
	}
	if es.Namespace != other.Namespace {
		return es.Namespace < other.Namespace
	}
	return es.Name < other.Name
}
