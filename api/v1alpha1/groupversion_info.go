// Package v1alpha1 holds the ElastiService API, group elasti.dev, version v1alpha1.
//
// It is a leaf package: it imports only apimachinery, so both planes and any
// client can use it without pulling in the operator or the resolver.
//
// +kubebuilder:object:generate=true
// +groupName=elasti.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "elasti.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ElastiService{}, &ElastiServiceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
