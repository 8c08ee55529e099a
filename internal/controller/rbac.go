package controller

// The operator's permissions. `make manifests` turns these markers into
// config/rbac. Scale subresources are granted per kind: to let Elasti scale
// another custom resource, add get;list;watch on the resource and
// get;update;patch on its /scale in a ClusterRole bound to the operator's
// ServiceAccount (see docs/operator.md).
//
// HorizontalPodAutoscalers are watched and patched: an HPA named in
// spec.autoscaler with minReplicas 0 has its floor held at 1 (package
// hpacustody).
//
// Pods are listed, live and never watched, in the targets' namespaces: once
// per wake from zero, to read the woken pod's phases for status.ledger
// (ledger.Observe), and every second while a wake is in progress, for
// status.wakeProgress and the fallback. The Events of a woken pod that may
// be pulling an image are listed the same way, by field selector
// (wakeprogress.Observe), and so are the FailedCreate Events of a target
// without a ReplicaFailure condition whose wake created no pod
// (fallback.Tracker.NotCreated); none is watched or cached.
//
// A sleepMode Doze resizes the target's pods in place (package dozer):
// patch on pods/resize, a subresource no rule on pods covers. The pods
// are listed with the list rule above, live, and never watched.
//
// Nodes are read, live, for network triggers: a Node's address and kubelet
// port, then its kubelet's Summary API, which the kubelet authorizes as get
// on nodes/stats (internal/scaling/kubelet.go). nodes/proxy is not needed.
//
// There is no Secret rule: a trigger's authSecretRef is read only if the
// namespace owner grants the operator get on that one Secret by name.
//
// One ConfigMap in the operator's own namespace, elasti-port-quarantine,
// keeps the freed resolver ports across restarts (ports.QuarantineRecord):
// get and update on it by name, and create, which cannot be narrowed to a
// name.

// +kubebuilder:rbac:groups=elasti.dev,resources=elastiservices,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=elasti.dev,resources=elastiservices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=elasti.dev,resources=elastiservices/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch,namespace=elasti-system
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes/stats,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=elasti-system
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=create,namespace=elasti-system
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;update,resourceNames=elasti-port-quarantine,namespace=elasti-system
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;get;list
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments/scale;statefulsets/scale;replicasets/scale,verbs=get;update;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=rollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=argoproj.io,resources=rollouts/scale,verbs=get;update;patch
// +kubebuilder:rbac:groups=keda.sh,resources=scaledobjects,verbs=get;patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
