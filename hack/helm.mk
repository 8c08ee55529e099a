# The Helm chart (charts/elasti). Included by the Makefile.

##@ Helm chart
.PHONY: helm
helm: ## Build (or reuse) the pinned helm; prints bin/tools/helm-<version>.
	@hack/helm.sh

.PHONY: helm-verify
helm-verify: ## helm lint the chart and helm template it with default values and with each toggle on.
	@hack/helm-verify.sh
