# The local Kubernetes cluster (test/cluster, docs/local-cluster.md).
# Included by the Makefile.

ELASTI_CLUSTER := $(CURDIR)/bin/elasti-cluster

.PHONY: $(ELASTI_CLUSTER)
$(ELASTI_CLUSTER):
	@go build -o $@ ./test/cluster/cmd/elasti-cluster

##@ Local cluster
.PHONY: cluster-up
cluster-up: deps $(ELASTI_CLUSTER) ## Bring up the local cluster (no-op when it runs; NODES=N for N nodes); prints the KUBECONFIG to use.
	@$(ELASTI_CLUSTER) up --k8s-bin-dir "$$(hack/k8s-binaries.sh)" $(if $(NODES),--nodes $(NODES))

.PHONY: cluster-down
cluster-down: $(ELASTI_CLUSTER) ## Stop the local cluster and remove everything it created.
	@$(ELASTI_CLUSTER) down --k8s-bin-dir "$$(hack/k8s-binaries.sh)"

.PHONY: cluster-status
cluster-status: $(ELASTI_CLUSTER) ## Show the local cluster's components, node and pods.
	@$(ELASTI_CLUSTER) status --k8s-bin-dir "$$(hack/k8s-binaries.sh)"

.PHONY: images
images: $(ELASTI_CLUSTER) ## Build the demo app, operator and resolver images; import them when the cluster runs.
	@$(ELASTI_CLUSTER) images --k8s-bin-dir "$$(hack/k8s-binaries.sh)"
