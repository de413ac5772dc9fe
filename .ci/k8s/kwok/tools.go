//go:build tools

// Package kwok pins KWOK (sigs.k8s.io/kwok), the controller .ci/k8s.sh starts with TFCLUSTER_K8S_SIM_NODES=N:
// it plays the kubelet of N simulated nodes against the test cluster's real API server (pods placed there run
// at once, as its Stage objects say). Its own module: its Kubernetes libraries are not the components'.
// Test infrastructure, not part of tfcluster.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
