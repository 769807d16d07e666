// Wrapper module: builds the Kubeflow training operator v1 (cmd/training-operator.v1).
// Upstream has no replaces; the wrapper only pins the version and go.sum.
module volcano-elastic.local/build/training-operator

go 1.26.0
