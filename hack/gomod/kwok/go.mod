// Wrapper module: builds kwok (sigs.k8s.io/kwok/cmd/kwok). Upstream has no replaces;
// the wrapper only pins the version and go.sum.
module volcano-elastic.local/build/kwok

go 1.26.0
