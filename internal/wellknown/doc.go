// Package wellknown names what the layers of the program and the operator tools agree on:
// node labels, the GPU taint, annotations and tags (labels.go); namespaces, Helm releases
// and the objects in them (names.go); the custom resources the tools read (resources.go).
//
// It is a leaf: it imports no part of the program and none of the Pulumi SDKs, so a tool
// that needs a name links none of them. (Karpenter keeps its keys in pkg/apis/v1/labels.go
// and ARC in constants.go, for the same reason.)
package wellknown
