# lux-gpu-ci — one entry point for humans and CI. `make help` lists the verbs.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
# STACK is the Pulumi stack the stack verbs act on: the one selected in this directory
# (`pulumi stack select`), as for gpuci and pulumi themselves, unless STACK=<name> is given.
# Asked once, and only by a verb that needs it; never a silent default (destroy!).
ifeq ($(origin STACK),undefined)
STACK = $(eval STACK := $(shell pulumi stack --show-name 2>/dev/null))$(STACK)
endif
# need-stack stops a verb that acts on a stack when none is selected or given.
need-stack = $(if $(STACK),,$(error no Pulumi stack selected here: run pulumi stack select <name>, or give STACK=<name>))
# GPUCI runs the operator CLI: built from this checkout, or a built one (GPUCI=path), as
# hack/bootstrap.sh takes it.
GPUCI ?= go run ./cmd/gpuci
GO_FILES = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')

.PHONY: help
help: ## List the verbs
	@grep -hE '^[a-z][a-z0-9-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

.PHONY: test
test: fmt-check vet ## The test command: gofmt, go vet, and every unit test (no network, no cloud)
	@# ./stack first: its test binary links every SDK and runs longest, so it starts at once.
	@# -ldflags=-w: test binaries without DWARF link in about half the time (nothing debugs them).
	@# GOGC=400: a third of the stack test's CPU was the collector's (the mocks unmarshal every
	@# CRD's schema); fewer collections for about twice its memory (1.3 → 2.5 GB): 0.93 of the
	@# wall time, paired farm-bench runs of make test.
	GOGC=400 go test -count=1 -ldflags=-w ./stack ./...

.PHONY: vet
vet: ## go vet ./..., the e2e package's build tag included (one run: loading the packages twice costs more)
	go vet -tags e2e ./...

.PHONY: e2e
e2e: ## Real engine, real API server: deploy the k8s layer on 127.0.0.1, re-up, update, destroy
	hack/e2e.sh

.PHONY: e2e-tools
e2e-tools: ## Build (or reuse) etcd, kube-apiserver, kube-controller-manager, pulumi, the k8s provider
	hack/e2e-tools.sh

.PHONY: fmt-check
fmt-check: ## Fail if gofmt would change a file
	@out=$$(gofmt -l $(GO_FILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: fmt
fmt: ## gofmt -w every Go file
	gofmt -w $(GO_FILES)

.PHONY: actionlint-config
actionlint-config: ## write .github/actionlint.yaml from every stack file's runner labels (make bootstrap does it for a new stack)
	$(GPUCI) actionlint-config --out .github/actionlint.yaml

.PHONY: lint
lint: ## actionlint every workflow (pinned in hack/tools/go.mod)
	GOFLAGS=-modfile=hack/tools/go.mod go tool actionlint .github/workflows/*.yml examples/workflows/*.yml

# The published gpuci binaries (release.yml): static, for Linux and macOS on amd64 and arm64,
# with their SHA-256 sums. VERSION is the release tag.
DIST_PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
.PHONY: dist
dist: ## Build gpuci for each platform into dist/ with SHA256SUMS (VERSION=v1.2.3)
	@test -n "$(VERSION)" || { echo "make dist needs VERSION=<tag>"; exit 1; }
	rm -rf dist && mkdir -p dist
	for p in $(DIST_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath \
			-ldflags "-s -w -X main.releaseVersion=$(VERSION)" -o dist/gpuci_$${p%/*}_$${p#*/} ./cmd/gpuci; \
	done
	cd dist && sha256sum gpuci_* > SHA256SUMS

.PHONY: examples
examples: ## Write examples/workflows: what gpuci workflows writes for dev (a test keeps them equal)
	$(GPUCI) workflows --stack dev --out examples/workflows

.PHONY: workflows
workflows: ## Print the workflows a repository needs for STACK (gpuci workflows; ARGS="--out DIR")
	$(need-stack)$(GPUCI) workflows --stack $(STACK) $(ARGS)

.PHONY: render
render: ## Offline, no credentials: write what STACK declares into out/STACK (CHARTS=all renders charts too)
	$(need-stack)go run ./hack/render --stack $(STACK) --out out/$(STACK) $(if $(CHARTS),--charts $(CHARTS))

.PHONY: verify
verify: ## Check the live cluster of STACK (kubeconfig: KUBECONFIG, else the stack output)
	$(need-stack)$(GPUCI) verify --stack $(STACK)

.PHONY: doctor
doctor: ## Troubleshoot the live cluster of STACK: symptom, evidence, fix (ARGS=--fix: restart a stuck listener, else drain the GPU NodePools)
	$(need-stack)$(GPUCI) doctor --stack $(STACK) $(ARGS)

.PHONY: cost
cost: ## Price STACK: idle, per build, per month, cold start (ARGS="--builds-per-day 30 --minutes 10")
	$(need-stack)$(GPUCI) cost --stack $(STACK) $(ARGS)

# Bootstrap's own default is the starter stack (one spot pool, the least quota); STACK=<name>
# on the command line or in the environment picks another.
BOOTSTRAP_STACK = $(if $(filter command line environment,$(origin STACK)),$(STACK),starter)

.PHONY: bootstrap
bootstrap: ## One command from an AWS account to a running stack, starter unless STACK= (needs GITHUB_ORG; makes the GitHub App unless GITHUB_PAT or the App vars are set)
	STACK=$(BOOTSTRAP_STACK) hack/bootstrap.sh

.PHONY: grow
grow: ## Let POOL of STACK run GPUS GPUs at once: the stack file (gpuci grow), the quota asked of AWS, the up
	$(need-stack)$(GPUCI) grow --stack $(STACK) --pool $(POOL) --gpus $(GPUS)
	STACK=$(STACK) hack/bootstrap.sh --grow

.PHONY: cuda-image
cuda-image: ## Put POOL of STACK on the CUDA runner image the copy publishes, once its nodes can pull it (gpuci cuda-image), then the up
	$(need-stack)$(GPUCI) cuda-image --stack $(STACK) --pool $(POOL)
	pulumi up --stack $(STACK)

.PHONY: identity
identity: ## The roles deploy.yml and preview.yml assume (identity/): DEPLOY_REPOSITORY=owner/name STACKS=dev,prod
	hack/identity.sh

.PHONY: preflight
preflight: ## make bootstrap's checks only: prerequisites, AWS credentials, spot role, GPU quotas (starter unless STACK=)
	STACK=$(BOOTSTRAP_STACK) hack/bootstrap.sh --preflight

.PHONY: preview
preview: ## pulumi preview of STACK; needs AWS credentials
	$(need-stack)pulumi preview --stack $(STACK) --diff

.PHONY: up
up: ## pulumi up of STACK
	$(need-stack)pulumi up --stack $(STACK)

.PHONY: destroy
destroy: ## pulumi destroy of STACK (Karpenter drains its GPU nodes first)
	$(need-stack)pulumi destroy --stack $(STACK)
