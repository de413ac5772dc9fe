//go:build tools

// Package k8s pins the Kubernetes components of the test cluster that .ci/k8s.sh builds and starts:
// the real control plane, the real kubelet and kubectl, at one version (k8s.io/kubernetes in go.mod,
// each staging module replaced by its matching v0.x release). Test infrastructure: not part of tfcluster.
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
