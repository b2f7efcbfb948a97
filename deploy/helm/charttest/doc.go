// Package charttest tests the Helm chart in deploy/helm/sundial: it renders
// the chart with the pinned Helm library, as `helm template` does, for the
// default values and for values-secured.yaml, and validates every object
// against the Kubernetes API types (a strict decode: an unknown or misplaced
// field fails) and the Prometheus Operator's, plus the references between
// objects that no schema checks (selectors, named ports, volumes, config
// keys, Secrets).
//
// It is a module of its own because Helm and the Kubernetes API pull in
// hundreds of packages that no Sundial binary needs; keeping them out of the
// main module keeps its build, its go.sum and its vulnerability surface
// small. `make test-chart` runs it, and `make verify` (so CI) runs that.
//
// The test needs no cluster and no network.
package charttest
